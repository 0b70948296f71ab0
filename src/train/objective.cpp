// make_objective (objective.hpp): the objective of a dataset's task.
#include "hpctrain/train/objective.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

std::unique_ptr<Objective> make_objective(const data::DatasetReader& dataset, int64_t loss_chunk_tokens) {
  switch (dataset.task()) {
    case data::Task::text_classification:
    case data::Task::image_classification:
      return make_classification_objective();
    case data::Task::causal_lm:
      return make_causal_lm_objective(loss_chunk_tokens);
  }
  HPCTRAIN_CHECK(false, "'{}': no training objective for task '{}'", dataset.path().string(),
                 data::to_string(dataset.task()));
  return nullptr;
}

}  // namespace hpctrain::train
