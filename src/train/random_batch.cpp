// random_batch.hpp: random token ids for the single-rank measurements.
#include "random_batch.hpp"

#include <ATen/ATen.h>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {

models::ModelInputs random_token_batch(const io::HfConfig& config, const MemoryEstimateOptions& o) {
  HPCTRAIN_CHECK(config.model_type() == "distilbert" || config.model_type() == "bert",
                 "--measure: model_type '{}' takes no token ids (distilbert and bert do)", config.model_type());
  const int64_t vocab = config.model_type() == "distilbert" ? config.distilbert().vocab_size : config.bert().vocab_size;
  models::ModelInputs inputs;
  inputs.input_ids = at::randint(vocab, {o.batch_size, o.sequence_length}, at::kLong);
  inputs.attention_mask = at::ones({o.batch_size, o.sequence_length}, at::kLong);
  inputs.labels = at::randint(config.common.num_labels(), {o.batch_size}, at::kLong);
  return inputs;
}

}  // namespace hpctrain::train
