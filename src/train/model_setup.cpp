// build_model and the presets (model_setup.hpp).
#include "model_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/weights.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weights.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"
#include "hpctrain/tokenize/vocab.hpp"
#include "hpctrain/train/compatibility.hpp"
#include "hpctrain/optim/optimizer.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPresetPrefix = "preset:";
// Files transformers' AutoTokenizer reads from a BERT-style folder.
constexpr const char* kTokenizerFileNames[] = {"vocab.txt", "tokenizer_config.json", "tokenizer.json",
                                                "special_tokens_map.json"};

bool is_text(const data::DatasetReader& dataset) { return data::is_text_task(dataset.task()); }

void check_preset_task(const std::string& name, const data::DatasetReader& dataset, data::Task task) {
  HPCTRAIN_CHECK(dataset.task() == task, "preset '{}' is a {} model, but '{}' is a {} dataset", name,
                 task == data::Task::causal_lm ? "causal language" : "text classification", dataset.path().string(),
                 data::to_string(dataset.task()));
}

// A causal-LM preset's config: the vocabulary of the dataset's tokenizer, and its BOS and EOS ids (prep lm
// records them) as config.json keys, for generation.
template <typename Config>
io::HfConfig causal_lm_preset(Config c, const data::DatasetReader& dataset) {
  c.vocab_size = dataset.vocab_size();
  io::HfConfig config(c);
  const nlohmann::json& tokenizer = dataset.tokenizer();
  for (const auto& [recorded, key] : {std::pair{"bos_id", "bos_token_id"}, std::pair{"eos_id", "eos_token_id"}})
    if (tokenizer.contains(recorded) && tokenizer[recorded].is_number_integer()) config.set_extra(key, tokenizer[recorded]);
  return config;
}
int64_t square_image_size(const data::DatasetReader& dataset, const std::string& preset) {
  HPCTRAIN_CHECK(!is_text(dataset), "preset '{}' is an image model, but '{}' is a text dataset", preset,
                 dataset.path().string());
  const data::SplitInfo info = dataset.split_info("train");
  HPCTRAIN_CHECK(info.height == info.width, "preset '{}' needs square images, '{}' has {}x{}", preset,
                 dataset.path().string(), info.height, info.width);
  return info.height;
}

io::HfConfig load_config(const TrainOptions& options, const data::DatasetReader& dataset) {
  if (!options.model_dir.empty()) return io::HfConfig::load(options.model_dir);
  if (options.model_config.rfind(kPresetPrefix, 0) == 0)
    return preset_config(options.model_config.substr(std::string(kPresetPrefix).size()), dataset);
  return io::HfConfig::load(options.model_config);
}

// The splits training reads: the train split and the evaluation split when the file has it.
std::vector<std::string> used_splits(const TrainOptions& options, const data::DatasetReader& dataset) {
  std::vector<std::string> splits{options.train_split};
  if (dataset.has_split(options.eval_split) && options.eval_split != options.train_split) splits.push_back(options.eval_split);
  return splits;
}

// Labels come from the dataset; returns true when the head changes size. `pretrained`: weights will be loaded.
bool set_dataset_labels(io::HfConfig& config, const data::DatasetReader& dataset, bool pretrained, ModelSetup& setup) {
  if (!data::has_labels(dataset.task())) return false;
  const std::vector<std::string>& names = dataset.label_names();
  if (config.common.id2label == names) return false;
  const bool resized = config.common.num_labels() != static_cast<int64_t>(names.size());
  if (pretrained)
    setup.notes.push_back(fmt::format("labels from the dataset: {} ({} had {})", fmt::join(names, ", "),
                                      resized ? "the classification head is re-initialized; the checkpoint" : "the checkpoint",
                                      fmt::join(config.common.id2label, ", ")));
  else
    setup.notes.push_back(fmt::format("labels from the dataset: {}", fmt::join(names, ", ")));
  config.common.set_labels(names);
  return resized;
}

// Note [Tokenizer matches the dataset]
// The tokenizer files are copied into every checkpoint and final/, beside the weights: a vocabulary other
// than the one `hpctrain prep` used would pair the weights with the wrong token ids, and nothing would fail.
// prep records the sha256 of its vocabulary (vocab_sha256: of vocab.txt's text, or of tokenizer.json's
// model.vocab written as that text, the same number for the same tokens); every vocabulary file the folder
// holds, vocab.txt and tokenizer.json alike, must have it. A folder or a dataset that gives nothing to
// compare is said in a note, not passed over in silence.
// A causal-lm file records the sha256 of the tokenizer.json `prep lm` read (its merges decide the ids as
// much as its vocabulary): the folder's tokenizer.json must be that file.
void check_tokenizer_json(const fs::path& dir, const data::DatasetReader& dataset, ModelSetup& setup) {
  const nlohmann::json& recorded = dataset.tokenizer();
  const fs::path file = dir / "tokenizer.json";
  if (!fs::is_regular_file(file) || !recorded.contains("tokenizer_json_sha256")) {
    setup.notes.push_back(fmt::format("'{}' or '{}' gives no tokenizer.json sha256: the tokenizer cannot be checked "
                                      "against the one the data was prepared with", dir.string(), dataset.path().string()));
    return;
  }
  const std::string expected = recorded["tokenizer_json_sha256"].get<std::string>(), actual = sha256_file_hex(file);
  HPCTRAIN_CHECK(actual == expected,
                 "'{}' is not the tokenizer '{}' was prepared with (sha256 {}, expected {}): the saved model would pair "
                 "these weights with the wrong tokenizer\n  hint: pass --tokenizer with the folder used by `hpctrain prep lm`",
                 file.string(), dataset.path().string(), actual.substr(0, 12), expected.substr(0, 12));
}

void check_vocabularies(const fs::path& dir, const data::DatasetReader& dataset, ModelSetup& setup) {
  if (dataset.task() == data::Task::causal_lm) return check_tokenizer_json(dir, dataset, setup);
  std::vector<std::pair<fs::path, std::string>> vocabularies;  // file, the sha256 of its vocabulary
  if (fs::is_regular_file(dir / "vocab.txt"))
    vocabularies.emplace_back(dir / "vocab.txt", tokenize::Vocab::from_file(dir / "vocab.txt").sha256());
  if (fs::is_regular_file(dir / "tokenizer.json"))
    vocabularies.emplace_back(dir / "tokenizer.json", tokenize::tokenizer_json_vocab(dir / "tokenizer.json").sha256());
  if (vocabularies.empty()) {
    setup.notes.push_back(
        fmt::format("'{}' has no vocab.txt or tokenizer.json: its tokenizer cannot be checked "
                    "against the vocabulary '{}' was prepared with",
                    dir.string(), dataset.path().string()));
    return;
  }
  const nlohmann::json& recorded = dataset.tokenizer();
  if (!recorded.contains("vocab_sha256") || !recorded["vocab_sha256"].is_string()) {
    setup.notes.push_back(
        fmt::format("'{}' records no vocab_sha256: the tokenizer in '{}' cannot be checked against it",
                    dataset.path().string(), dir.string()));
    return;
  }
  const std::string expected = recorded["vocab_sha256"].get<std::string>();
  for (const auto& [file, sha256] : vocabularies)
    HPCTRAIN_CHECK(
        sha256 == expected,
        "'{}' is not the vocabulary '{}' was prepared with (vocab_sha256 {}, expected {}): the saved model "
        "would pair these weights with the wrong tokenizer\n  hint: pass --tokenizer with the folder used by "
        "`hpctrain prep`",
        file.string(), dataset.path().string(), sha256.substr(0, 12), expected.substr(0, 12));
}

void find_tokenizer_files(const TrainOptions& options, const data::DatasetReader& dataset, ModelSetup& setup) {
  const fs::path dir = !options.tokenizer.empty() ? options.tokenizer : options.model_dir;
  if (!dir.empty()) {
    for (const char* name : kTokenizerFileNames)
      if (fs::is_regular_file(dir / name)) setup.tokenizer_files.push_back(dir / name);
  }
  // The base's generation settings (EOS ids, sampling defaults) go with the model, as transformers' save keeps them.
  const fs::path generation_config = options.model_dir / "generation_config.json";
  if (!options.model_dir.empty() && fs::is_regular_file(generation_config) &&
      std::none_of(setup.tokenizer_files.begin(), setup.tokenizer_files.end(),
                   [](const fs::path& file) { return file.filename() == "generation_config.json"; }))
    setup.tokenizer_files.push_back(generation_config);
  if (!is_text(dataset)) return;
  if (setup.tokenizer_files.empty()) {
    setup.notes.push_back(
        fmt::format("no tokenizer files{} (give --tokenizer DIR, the folder the data was prepared "
                    "with): the vocabulary cannot be checked against '{}', and checkpoints and "
                    "final/ will load as models but not with AutoTokenizer",
                    dir.empty() ? "" : fmt::format(" in '{}'", dir.string()), dataset.path().string()));
    return;
  }
  check_vocabularies(dir, dataset, setup);
}

// The weights of `dir` into `model` (Note [Base checkpoints]; a resized head dropped). A model whose parameters are
// deferred (stage 3, Note [Deferred materialization]) gets the loaded values as views into the mapped files, taken
// when each unit is materialized: no rank holds the whole model or a whole copy of the files' tensors.
models::LoadReport load_weights(models::Model& model, const fs::path& dir, bool resized) {
  if (!model.deferred_seed()) {
    models::StateDict weights = models::read_weights(dir);
    if (resized) models::drop_resized_head(model, weights);
    models::LoadReport report = models::load_state_dict(model, weights, dir.string());
    check_finite_weights(model, dir.string());
    return report;
  }
  return models::defer_pretrained_weights(model, dir, resized, [&](const at::Tensor& value, const std::string& key) {
    check_finite_tensor(value, key, dir.string());
  });
}

}  // namespace

std::vector<std::string> model_presets() { return {"tiny-distilbert", "tiny-bert", "cnn", "mlp", "tiny-gpt2", "tiny-llama"}; }

io::HfConfig preset_config(const std::string& name, const data::DatasetReader& dataset) {
  if (name == "tiny-distilbert" || name == "tiny-bert") check_preset_task(name, dataset, data::Task::text_classification);
  if (name == "tiny-gpt2" || name == "tiny-llama") check_preset_task(name, dataset, data::Task::causal_lm);
  if (name == "tiny-gpt2") {
    io::Gpt2Config c;
    c.n_embd = 128, c.n_layer = 2, c.n_head = 2, c.n_positions = 1024;
    return causal_lm_preset(c, dataset);
  }
  if (name == "tiny-llama") {
    io::LlamaConfig c;
    c.hidden_size = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.intermediate_size = 256, c.max_position_embeddings = 2048;
    return causal_lm_preset(c, dataset);
  }
  if (name == "tiny-distilbert") {
    io::DistilBertConfig c;
    c.vocab_size = dataset.vocab_size();
    c.max_position_embeddings = 512;
    c.n_layers = 2, c.n_heads = 2, c.dim = 128, c.hidden_dim = 256;
    return io::HfConfig(c);
  }
  if (name == "tiny-bert") {
    io::BertConfig c;
    c.vocab_size = dataset.vocab_size();
    c.num_hidden_layers = 2, c.num_attention_heads = 2, c.hidden_size = 128, c.intermediate_size = 256;
    return io::HfConfig(c);
  }
  if (name == "cnn" || name == "mlp") {
    const int64_t size = square_image_size(dataset, name);
    const int64_t channels = dataset.split_info("train").channels;
    if (name == "cnn") {
      io::CnnConfig c;
      c.in_channels = channels, c.image_size = size;
      return io::HfConfig(c);
    }
    io::MlpConfig c;
    c.in_channels = channels, c.image_size = size;
    return io::HfConfig(c);
  }
  fail("--model-config preset:{}: unknown preset; known: {}", name, fmt::join(model_presets(), ", "));
}

io::HfConfig check_model_config(const TrainOptions& options, const data::DatasetReader& dataset) {
  const std::string source = !options.model_dir.empty() ? options.model_dir.string() : options.model_config;
  io::HfConfig config = load_config(options, dataset);
  check_model_fits_dataset(config, source, dataset, used_splits(options, dataset), /*check_labels=*/false);
  return config;
}

ModelSetup build_model(const TrainOptions& options, const data::DatasetReader& dataset, int world_size) {
  ModelSetup setup;
  const std::string source = !options.model_dir.empty() ? options.model_dir.string() : options.model_config;
  io::HfConfig config = check_model_config(options, dataset);
  if (!options.model_dir.empty()) models::check_not_prequantized(config);  // its packed weights would not load
  const bool resized = set_dataset_labels(config, dataset, !options.model_dir.empty(), setup);
  // Note [Size before building]: training holds weights, gradients and the optimizer's state (bounded
  // from above by the state of one vector of all the parameters: factored or small tensors hold less). With
  // --zero-stage 3 over N ranks a rank keeps 1/N of the weights, the gradients and the state (Note [Sharded
  // parameters]); it builds the model one unit at a time (Note [Deferred materialization]), or the whole model
  // once where it adds adapters.
  const int64_t shards = options.accelerator.zero_stage == 3 ? std::max(world_size, 1) : 1;
  const bool unit_by_unit = shards > 1 && options.lora_r == 0;
  const std::optional<models::Quant4Options> quant = options.lora_r > 0 ? quant4_options_of(options) : std::nullopt;
  const std::string described = options.model_config.rfind(kPresetPrefix, 0) == 0 ? source : config.source();
  if (options.lora_r > 0) {
    // LoRA: the frozen base once, no gradients or optimizer state for it (the adapters' are small); QLoRA: the base
    // in 4-bit form (Note [Quantized at load]: never more than one layer in float32).
    const auto four_bit = [&](int64_t parameters) { return models::quant4_bytes(parameters, *quant); };
    models::check_model_fits_host(config, quant ? 0 : 1, described,
                                  quant ? "QLoRA (the base in 4-bit form)" : "LoRA (the frozen base's weights)",
                                  quant ? models::ExtraBytes(four_bit) : models::ExtraBytes());
  } else {
    const auto optimizer_state = [&](int64_t parameters) {
      const int64_t state = optim::optimizer_state_bytes(options.optimizer, {parameters});
      return shards == 1 ? state : (8 * parameters + state) / shards;
    };
    const std::string optim_name = optim::canonical_optimizer_name(options.optimizer.optim);
    // config.source() is the config.json file read (a preset has none: its name).
    models::check_model_fits_host(
        config, shards == 1 ? 2 : unit_by_unit ? 0 : 1, described,
        shards == 1 ? fmt::format("training (weights, gradients, {} state)", optim_name)
                    : fmt::format("training at --zero-stage 3 over {} ranks ({}1/{} of weights, gradients, {} state)",
                                  shards, unit_by_unit ? "" : "the whole model built once; ", shards, optim_name),
        optimizer_state);
  }
  // Note [Deferred materialization]: stage 3 materializes unit by unit into the shards (FullySharded::prepare_model);
  // QLoRA layer by layer as it quantizes (Note [Quantized at load] in src/models/qlora.cpp).
  // What the deferred parts and the float32 layers free is returned to the OS as it is freed (Note [Host allocator]):
  // the load's peak is then about one layer over the 4-bit model, not the float32 model the tuned heap would keep.
  std::optional<core::LiveTensorResidency> residency;
  if (quant) residency.emplace();
  setup.model = models::build_seeded_model(config, options.accelerator.seed, unit_by_unit || quant.has_value());
  if (setup.model->transformer_layers().empty()) models::materialize_all(*setup.model);
  if (!options.model_dir.empty()) {
    const std::string summary = load_weights(*setup.model, options.model_dir, resized).summary();
    if (!summary.empty()) setup.notes.push_back(summary);
  }
  if (auto lora = lora_config_of(options, *setup.model)) {  // after the base is loaded: adapters start from it
    setup.notes.push_back(models::apply_lora(*setup.model, *lora).summary());
    if (quant)  // Note [Quantized base]: the frozen layers, after the adapters
      setup.notes.push_back(models::quantize_frozen_base(*setup.model, *quant).summary());
    setup.lora = std::make_shared<LoraRun>(setup.model, std::move(*lora), options.model_dir);
  }
  find_tokenizer_files(options, dataset, setup);
  return setup;
}

}  // namespace hpctrain::train
