// Model <-> dataset agreement and finite weights (Note [Model fits the dataset], compatibility.hpp).
#include "hpctrain/train/compatibility.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/registry.hpp"

namespace hpctrain::train {
namespace {

bool is_text_model(const io::HfConfig& config) {
  return config.model_type() == "distilbert" || config.model_type() == "bert";
}

bool is_image_model(const io::HfConfig& config) {
  return config.model_type() == "hpctrain-cnn" || config.model_type() == "hpctrain-mlp";
}

bool is_causal_lm(const io::HfConfig& config) {
  return config.is_known_model() && models::model_kind(config.model_type()) == models::ModelKind::causal_lm;
}

struct TextLimits {
  int64_t vocab_size = 0, max_positions = 0, type_vocab_size = 0;  // type_vocab_size 0: ignores token_type_ids
  const char* positions_field = "max_position_embeddings";          // config.json's name of max_positions
};

TextLimits text_limits(const io::HfConfig& config) {
  if (config.model_type() == "gpt2") return {config.gpt2().vocab_size, config.gpt2().n_positions, 0, "n_positions"};
  if (is_causal_lm(config)) return {config.llama_family().vocab_size, config.llama_family().max_position_embeddings, 0};
  if (config.model_type() == "distilbert") {
    const auto& c = config.distilbert();
    return {c.vocab_size, c.max_position_embeddings, 0};
  }
  const auto& c = config.bert();
  return {c.vocab_size, c.max_position_embeddings, c.type_vocab_size};
}

// The option of the command that made `dataset` which bounds its rows: prep lm's --block-size (packed rows) or
// --max-length (--packing none), prep text's --max-length.
std::string row_length_option(const data::DatasetReader& dataset) {
  if (dataset.task() != data::Task::causal_lm) return "`prep text --max-length`";
  const nlohmann::json& tokenizer = dataset.tokenizer();
  const bool packed = !tokenizer.is_object() || tokenizer.value("packing", std::string("group")) != "none";
  return packed ? "`prep lm --block-size`" : "`prep lm --packing none --max-length`";
}

void check_text_split(const TextLimits& limits, const std::string& model, const data::DatasetReader& dataset,
                      const std::string& split) {
  const data::SplitInfo info = dataset.split_info(split);
  const std::vector<int64_t> lengths = dataset.read_lengths(split);
  const auto longest = std::max_element(lengths.begin(), lengths.end());
  if (longest != lengths.end()) {
    HPCTRAIN_CHECK(*longest <= limits.max_positions,
                   "{}:/{} example {} has {} tokens but {} has "
                   "{} {}\n  hint: prepare the data with {} {} or less",
                   dataset.path().string(), split, longest - lengths.begin(), *longest, model, limits.positions_field,
                   limits.max_positions, row_length_option(dataset), limits.max_positions);
  }
  if (dataset.task() == data::Task::causal_lm) {  // a row predicts each token after its first
    int64_t predicted = 0;
    for (const int64_t length : lengths) predicted += std::max<int64_t>(length - 1, 0);
    HPCTRAIN_CHECK(predicted > 0, "{}:/{}: its {} row(s) hold no predicted token (every row has fewer than 2 tokens; "
                   "a causal LM predicts each token after the first): a loss over 0 tokens is not a number, and a "
                   "perplexity over them means nothing\n  hint: prepare the data with {} 2 or more",
                   dataset.path().string(), split, lengths.size(), row_length_option(dataset));
  }
  HPCTRAIN_CHECK(!info.has_token_type_ids || limits.type_vocab_size == 0 || limits.type_vocab_size >= 2,
                 "{}:/{} stores token_type_ids 0 and 1 (sentence pairs) but {} has type_vocab_size {}: expected >= 2",
                 dataset.path().string(), split, model, limits.type_vocab_size);
}

void check_text(const io::HfConfig& config, const std::string& model, const data::DatasetReader& dataset,
                const std::vector<std::string>& splits) {
  if (dataset.task() == data::Task::causal_lm)
    HPCTRAIN_CHECK(is_causal_lm(config), "{}: model_type '{}' is not a causal language model, but '{}' is a causal-lm "
                   "dataset\n  hint: train a gpt2, llama or qwen2 model on it (--model-config preset:tiny-gpt2)", model,
                   config.model_type(), dataset.path().string());
  else
    HPCTRAIN_CHECK(is_text_model(config), "{}: model_type '{}' is not a text model for classification, but "
                   "'{}' is a text classification dataset", model, config.model_type(), dataset.path().string());
  const TextLimits limits = text_limits(config);
  HPCTRAIN_CHECK(dataset.vocab_size() <= limits.vocab_size,
                 "{}: vocab_size {} is smaller than the tokenizer of '{}' "
                 "({} tokens): token ids would fall outside the embedding\n  hint: prepare the data with this model's "
                 "tokenizer",
                 model, limits.vocab_size, dataset.path().string(), dataset.vocab_size());
  for (const std::string& split : splits) check_text_split(limits, model, dataset, split);
}

void check_images(const io::HfConfig& config, const std::string& model, const data::DatasetReader& dataset,
                  const std::vector<std::string>& splits) {
  HPCTRAIN_CHECK(is_image_model(config), "{}: model_type '{}' is not an image model, but '{}' is an image dataset",
                 model, config.model_type(), dataset.path().string());
  const bool cnn = config.model_type() == "hpctrain-cnn";
  const int64_t channels = cnn ? config.cnn().in_channels : config.mlp().in_channels;
  const int64_t size = cnn ? config.cnn().image_size : config.mlp().image_size;
  for (const std::string& split : splits) {
    const data::SplitInfo info = dataset.split_info(split);
    HPCTRAIN_CHECK(info.channels == channels && info.height == size && info.width == size,
                   "{}:/{} holds images of {} x {} x {} (C x H x W) but {} expects in_channels {}, image_size {}",
                   dataset.path().string(), split, info.channels, info.height, info.width, model, channels, size);
  }
}

}  // namespace

void check_model_fits_dataset(const io::HfConfig& config, const std::string& model_source,
                              const data::DatasetReader& dataset, const std::vector<std::string>& splits,
                              bool check_labels) {
  if (data::is_text_task(dataset.task()))
    check_text(config, model_source, dataset, splits);
  else
    check_images(config, model_source, dataset, splits);
  if (!check_labels || !data::has_labels(dataset.task())) return;
  HPCTRAIN_CHECK(config.common.num_labels() == dataset.num_labels(),
                 "'{}' has {} labels but the model in {} has {} "
                 "(config.json id2label)",
                 dataset.path().string(), dataset.num_labels(), model_source, config.common.num_labels());
}

void check_finite_weights(const models::Model& model, const std::string& model_source) {
  for (const auto& item : model.named_parameters()) check_finite_tensor(item.value(), item.key(), model_source);
}

void check_finite_tensor(const at::Tensor& tensor, const std::string& name, const std::string& model_source) {
  const int64_t bad = tensor.numel() - at::isfinite(tensor.detach()).sum().item<int64_t>();
  HPCTRAIN_CHECK(bad == 0,
                 "{}: tensor '{}' holds {} NaN/Inf value(s) of {}: the weights are corrupt (a diverged "
                 "run?)\n  hint: use an earlier checkpoint",
                 model_source, name, bad, tensor.numel());
}

}  // namespace hpctrain::train
