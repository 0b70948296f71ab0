// make_objective (objective.hpp): the objective of a dataset's task.
#include "hpctrain/train/objective.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

std::unique_ptr<Objective> make_objective(const data::DatasetReader& dataset) {
  switch (dataset.task()) {
    case data::Task::text_classification:
    case data::Task::image_classification:
      return make_classification_objective();
    case data::Task::causal_lm:
      fail("'{}' is a causal-lm dataset (token rows from `hpctrain prep lm`): causal-lm datasets need a causal LM "
           "model and objective, which are not supported yet\n  hint: train and evaluate the sequence classifiers on a "
           "file from `hpctrain prep text` or `hpctrain prep images`", dataset.path().string());
  }
  HPCTRAIN_CHECK(false, "'{}': no training objective for task '{}'", dataset.path().string(),
                 data::to_string(dataset.task()));
  return nullptr;
}

}  // namespace hpctrain::train
