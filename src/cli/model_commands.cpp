// `hpctrain eval`, `hpctrain predict` and `hpctrain inspect MODEL_DIR`: a Hugging Face model folder
// applied to a dataset file, data-parallel under mpirun (rank 0 prints and writes).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/field_count.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/output_check.hpp"
#include "hpctrain/models/adapter_base.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/train/compatibility.hpp"
#include "hpctrain/train/device.hpp"
#include "hpctrain/train/evaluation.hpp"
#include "hpctrain/train/objective.hpp"
#include "hpctrain/train/run_agreement.hpp"
#include "hpctrain/train/split_progress.hpp"
#include "hpctrain/train/threads.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;

struct ModelDataOptions {
  std::string model, adapter, data, split = "validation", device = "auto";
  int64_t batch_size = 64;
  int64_t cache_mb = 512;
  int threads = 0;
  double collective_timeout = dist::kDefaultCollectiveTimeoutSeconds;
  QuantizeBaseFlags quantize;  // QLoRA: the base's frozen layers in 4-bit form (needs --adapter)
  int64_t loss_chunk_tokens = models::kDefaultLossChunkTokens;  // Note [Chunked loss]
  bool progress = true;  // rank 0's: not agreed (Note [Agreed options])
};

void add_model_data_options(po::options_description& options, ModelDataOptions& values) {
  options.add_options()
      ("model", po::value(&values.model)->required(), "Hugging Face model folder (config.json + model.safetensors)")
      ("adapter", po::value(&values.adapter), "LoRA adapter folder in PEFT's format (adapter_config.json + "
       "adapter_model.safetensors, from `hpctrain train --lora-r` or peft's save_pretrained) applied to --model")
      ("data", po::value(&values.data)->required(), "dataset file written by `hpctrain prep` (.h5)")
      ("split", po::value(&values.split)->default_value(values.split), "train | validation | test")
      ("batch-size", po::value(&values.batch_size)->default_value(values.batch_size), "examples per rank and batch")
      ("cache-mb", po::value(&values.cache_mb)->default_value(values.cache_mb),
       "MiB of examples each rank keeps in memory; a larger shard is streamed in blocks")
      ("threads", po::value(&values.threads)->default_value(0), "CPU threads per rank (0: cores on the node / ranks on the node)")
      ("device", po::value(&values.device)->default_value(values.device), "auto | cpu | cuda")
      ("collective-timeout", po::value(&values.collective_timeout)->default_value(values.collective_timeout),
       "seconds a collective may wait for the other ranks before the job ends naming the missing ones (0: off)")
      ("no-progress", po::bool_switch()->notifier([&values](bool off) { values.progress = !off; }),
       "no progress bar or progress lines on stderr (shown as train shows them: a bar on a terminal, else a line "
       "at every tenth of a split of 10 batches or more)");
  options.add(quantize_base_group(values.quantize));
  options.add(loss_group(values.loss_chunk_tokens));
}

// --quantize-base's options (Note [Quantized base]); it needs an adapter: a 4-bit base alone is not what was trained.
std::optional<models::Quant4Options> quant4_options(const ModelDataOptions& o) {
  const auto options = quantize_base_options(o.quantize);
  HPCTRAIN_CHECK(!options || !o.adapter.empty(), "--quantize-base {} needs --adapter DIR: QLoRA evaluates a LoRA adapter "
                 "over the 4-bit base", o.quantize.type);
  return options;
}

std::string quant4_text(const std::optional<models::Quant4Options>& q) {
  return q ? fmt::format("{} double_quant={} blocksize={} embeddings={}", models::to_string(q->type), q->double_quant,
                         q->blocksize, q->embeddings) : "";
}

// Note [Agreed options]: what the ranks of eval/predict compare before their first collective. --threads
// may differ per node; --output and --json are rank 0's.
train::RunDescription describe(const ModelDataOptions& o, const data::DatasetReader& dataset) {
  static_assert(core::field_count<ModelDataOptions>() == 12, "ModelDataOptions changed: describe the new member here");
  // --no-progress is rank 0's (the others show nothing): not compared.
  train::RunDescription description = {{"--model", train::path_identity(o.model)},
                                       {"--adapter", o.adapter.empty() ? "" : train::path_identity(o.adapter)},
                                       {"--split", o.split},
                                       {"--batch-size", std::to_string(o.batch_size)},
                                       {"--cache-mb", std::to_string(o.cache_mb)},
                                       {"--device", o.device},
                                       {"--collective-timeout", fmt::format("{}", o.collective_timeout)},
                                       {"--quantize-base", quant4_text(quant4_options(o))},
                                       {"--loss-chunk-tokens", std::to_string(o.loss_chunk_tokens)}};
  train::add_dataset_identity(description, "--data", dataset);
  return description;
}

// Collective: sets the collective timeout and agrees on the options and the dataset across ranks.
void agree_on_options(const ModelDataOptions& options, dist::Comm& comm, const char* command) {
  HPCTRAIN_CHECK(options.collective_timeout >= 0 && options.collective_timeout <= 1e9,
                 "--collective-timeout {}: expected seconds >= 0 (0 = off)", options.collective_timeout);
  comm.set_collective_timeout(options.collective_timeout);
  train::RunDescription mine;
  dist::run_collectively(comm, "describing the run for the ranks' agreement", [&] {
    const data::DatasetReader dataset(options.data);
    (void)train::make_objective(dataset, options.loss_chunk_tokens);  // a task without one fails before the model loads
    mine = describe(options, dataset);
  });
  train::agree_across_ranks(comm, mine, fmt::format("the options of `hpctrain {}` and its dataset", command));
}

// Model and this rank's loader over the split, checked against each other.
struct Loaded {
  std::shared_ptr<models::Model> model;  // a classifier, or a causal LM for a causal-lm dataset
  std::unique_ptr<loader::ShardLoader> loader;
  at::Device device{at::kCPU};
};

loader::LoaderOptions split_loader_options(const ModelDataOptions& options, dist::Comm& comm) {
  loader::LoaderOptions loader_options;
  loader_options.split = options.split;
  loader_options.batch_size = options.batch_size;
  loader_options.shuffle = data::ShuffleMode::none;
  loader_options.cache_bytes = options.cache_mb << 20;
  loader_options.rank = comm.rank();
  loader_options.world_size = comm.world_size();
  return loader_options;
}

// The dataset and the model's config are checked against each other (Note [Model fits the dataset]) before
// the weights are read; then the weights must be finite. Collective: every rank fails together.
Loaded load_model_and_data(const ModelDataOptions& options, dist::Comm& comm) {
  // Bounded before any arithmetic (cache_mb << 20; issue 30).
  HPCTRAIN_CHECK(options.batch_size > 0 && options.batch_size <= (int64_t{1} << 24),
                 "--batch-size {}: expected 1 to {}", options.batch_size, int64_t{1} << 24);
  HPCTRAIN_CHECK(options.cache_mb > 0 && options.cache_mb <= (int64_t{1} << 30), "--cache-mb {}: expected 1 to {} MiB",
                 options.cache_mb, int64_t{1} << 30);
  (void)train::apply_threads(options.threads, comm.local_size());
  Loaded loaded;
  dist::run_collectively(comm, "loading the model and the dataset", [&] {
    loaded.device = train::select_device(options.device, comm);
    train::use_device(loaded.device);  // Note [Current device]
    loaded.loader = std::make_unique<loader::ShardLoader>(options.data, split_loader_options(options, comm));
    const auto& reader = loaded.loader->reader();
    const io::HfConfig config = options.adapter.empty() ? io::HfConfig::load(options.model)
                                                        : models::adapter_base_config(options.model, options.adapter, reader.label_names());
    train::check_model_fits_dataset(config, options.model, reader, {options.split}, /*check_labels=*/true);
    // Note [LoRA]: PeftModel.from_pretrained(base, adapter), the base's head sized for the adapter's (Note [Adapter labels])
    // Note [Quantized at load]: a 4-bit base is quantized as it is read, after the adapter is attached.
    const auto quant = quant4_options(options);
    if (quant) models::check_not_prequantized(config);
    std::string quantized;
    auto pretrained = options.adapter.empty() ? models::load_pretrained(options.model)
                      : quant ? models::load_quantized_with_adapter(options.model, options.adapter, config, *quant, &quantized)
                              : models::load_pretrained_with_adapter(options.model, options.adapter, config);
    if (!pretrained.report.newly_initialized.empty())
      log::warning("{}: the head ({}) is not in the checkpoint; its predictions are random\n{}", options.model,
                   fmt::join(pretrained.report.newly_initialized, ", "), pretrained.report.summary());
    train::check_finite_weights(*pretrained.model, options.model);
    if (quant) log::info("{}", quantized);
    loaded.model = pretrained.model;
    loaded.model->to(loaded.device);
  });
  const auto& dataset_labels = loaded.loader->reader().label_names();
  if (data::has_labels(loaded.loader->reader().task()) && dataset_labels != loaded.model->config().common.id2label)
    log::warning("label names differ: dataset {} vs model {}; using the model's", fmt::join(dataset_labels, ","),
                 fmt::join(loaded.model->config().common.id2label, ","));
  return loaded;
}

// Runs `work`; an Error gets the model and the split of the dataset in front.
template <typename Work>
auto with_context(const ModelDataOptions& options, Work&& work) {
  try {
    return work();
  } catch (const Error& error) {
    fail("{} on split '{}' of {}: {}", options.model, options.split, options.data, error.what());
  }
}

// Writes `text` to `path` through io::write_file_atomically (no temporary survives a failure).
void write_predictions(const fs::path& path, const std::string& text) {
  std::error_code error;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), error);
  HPCTRAIN_CHECK(!error, "--output '{}': cannot create the folder '{}': {}", path.string(), path.parent_path().string(),
                 error.message());
  io::write_file_atomically(path, text);
}

}  // namespace

int eval_command(const Args& args, dist::Comm& comm) {
  ModelDataOptions options;
  bool json = false;
  po::options_description description("Evaluate");
  add_model_data_options(description, options);
  description.add_options()("json", po::bool_switch(&json), "print JSON");
  po::variables_map values;
  if (!parse_options(args, "hpctrain eval --model DIR [--adapter DIR] --data FILE.h5 [--split validation] [--json]", description, values))
    return 0;
  if (json) {  // stdout holds the JSON alone (loading logs notes, e.g. --quantize-base's)
    log::Context quiet = log::context();
    quiet.quiet = true;
    log::set_context(quiet);
  }
  agree_on_options(options, comm, "eval");
  Loaded loaded = load_model_and_data(options, comm);
  // Note [Objectives]: the task's report.
  const auto objective = train::make_objective(loaded.loader->reader(), options.loss_chunk_tokens);
  const train::EvalContext context{comm, loaded.device, train::NonFinite::fail, std::nullopt};
  train::SplitProgress progress("eval", loaded.loader->batches_per_epoch(), comm.is_main_process(), options.progress);
  loaded.loader->set_batch_observer([&progress](int64_t done) { progress.update(done); });
  const auto result = with_context(options, [&] { return objective->evaluate(*loaded.model, *loaded.loader, context); });
  if (!comm.is_main_process()) return 0;
  if (json) std::cout << result.report.dump(2) << "\n";
  else std::cout << fmt::format("{} on {} ({} split):\n", options.model, options.data, options.split) << result.table;
  return 0;
}

int predict_command(const Args& args, dist::Comm& comm) {
  ModelDataOptions options;
  std::string output;
  bool overwrite = false, logits = false;
  po::options_description description("Predict");
  add_model_data_options(description, options);
  description.add_options()
      ("output", po::value(&output)->required(), "JSONL file: one line per example, in stored order")
      ("overwrite", po::bool_switch(&overwrite), "replace an existing --output file (never one of the inputs)")
      ("logits", po::bool_switch(&logits), "a causal LM's lines add \"logprobs\": the log-probability of each "
       "predicted token (position t's log_softmax at token t+1), to compare with transformers; a classifier's lines "
       "carry their \"logits\" always");
  po::variables_map values;
  if (!parse_options(args, "hpctrain predict --model DIR [--adapter DIR] --data FILE.h5 --split S --output preds.jsonl [--logits]", description, values))
    return 0;
  agree_on_options(options, comm, "predict");
  dist::run_collectively(comm, "checking --output", [&] {
    if (!comm.is_main_process()) return;
    std::vector<fs::path> inputs = io::files_in(options.model);
    for (const fs::path& file : io::files_in(options.adapter)) inputs.push_back(file);
    inputs.push_back(options.data);
    output = io::check_output_file(output, inputs, overwrite).string();
  });
  Loaded loaded = load_model_and_data(options, comm);
  // Note [Objectives]: what predict writes.
  const auto objective = train::make_objective(loaded.loader->reader(), options.loss_chunk_tokens);
  train::EvalContext context{comm, loaded.device, train::NonFinite::fail, std::nullopt};
  context.logits = logits;
  train::SplitProgress progress("predict", loaded.loader->batches_per_epoch(), comm.is_main_process(), options.progress);
  loaded.loader->set_batch_observer([&progress](int64_t done) { progress.update(done); });
  const std::string text =
      with_context(options, [&] { return objective->predictions(*loaded.model, *loaded.loader, context); });
  if (!comm.is_main_process()) return 0;
  write_predictions(output, text);
  log::info("wrote {} predictions to {}", loaded.loader->num_examples(), output);
  return 0;
}

namespace {

// transformers' config class of a model type ("GPT2Config"), as `print(AutoConfig.from_pretrained(dir))` heads it.
std::string config_class(const std::string& model_type) {
  static const std::map<std::string, std::string> names = {{"bert", "BertConfig"},
                                                           {"distilbert", "DistilBertConfig"},
                                                           {"gpt2", "GPT2Config"},
                                                           {"llama", "LlamaConfig"},
                                                           {"qwen2", "Qwen2Config"}};
  const auto found = names.find(model_type);
  return found != names.end() ? found->second : model_type + " Config";
}

// Parameter counts grouped by the first two name parts ("distilbert.embeddings", "transformer.h"; a top-level
// "classifier.weight" -> "classifier").
std::map<std::string, int64_t> parameters_by_module(const models::Model& model) {
  std::map<std::string, int64_t> by_module;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    const auto first = name.find('.');
    const auto second = first == std::string::npos ? std::string::npos : name.find('.', first + 1);
    const bool leaf = second == std::string::npos || name.compare(first + 1, second - first - 1, "weight") == 0;
    by_module[leaf ? name.substr(0, first) : name.substr(0, second)] += item.value().numel();
  }
  return by_module;
}

// The head's status: to initialize, tied to the input embedding (Note [Tied head]: no lm_head tensor, and any
// stored lm_head.weight is ignored), or present.
std::string head_status(const models::Model& model, const models::LoadReport& report) {
  if (!report.newly_initialized.empty())
    return fmt::format("will be initialized: {}", fmt::join(report.newly_initialized, ", "));
  const auto* lm = dynamic_cast<const models::CausalLM*>(&model);
  if (lm != nullptr && lm->tied_head())
    return fmt::format("tied: lm_head is the input embedding (vocabulary {}, no lm_head.weight)", lm->vocab_size());
  if (lm != nullptr) return fmt::format("present: lm_head (vocabulary {}, untied)", lm->vocab_size());
  return "present";
}

}  // namespace

int inspect_model(const std::string& dir, bool json) {
  auto pretrained = models::load_pretrained(dir);
  const auto& model = *pretrained.model;
  const std::map<std::string, int64_t> by_module = parameters_by_module(model);
  int64_t total = 0;
  for (const auto& [group, count] : by_module) total += count;
  std::map<std::string, int64_t> dtypes;
  for (const auto& [name, tensor] : models::read_weights(dir)) ++dtypes[std::string(c10::toString(tensor.scalar_type()))];
  std::vector<std::string> tokenizer_files;
  for (const char* file : {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    if (fs::exists(fs::path(dir) / file)) tokenizer_files.push_back(file);
  const auto& report = pretrained.report;
  const std::string head = head_status(model, report);
  const std::string architecture = model.spec().architecture;
  if (json) {
    nlohmann::json out = {{"config", model.config().to_json()}, {"architecture", architecture}, {"parameters", total},
                          {"parameters_by_module", by_module},  {"stored_dtypes", dtypes},      {"head", head},
                          {"tokenizer_files", tokenizer_files}, {"ignored", report.ignored}};
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << fmt::format("{}\n{} {}\n\n", dir, config_class(model.config().model_type()),
                           model.config().to_json().dump(2));
  std::cout << fmt::format("architecture  {}\nparameters    {}\n", architecture, total);
  for (const auto& [group, count] : by_module) std::cout << fmt::format("  {:<36} {:>12}\n", group, count);
  std::cout << "stored dtypes ";
  for (const auto& [dtype, count] : dtypes) std::cout << fmt::format("{} ({} tensors)  ", dtype, count);
  std::cout << fmt::format("\nhead          {}\n", head);
  if (!report.ignored.empty()) std::cout << fmt::format("ignored       {}\n", fmt::join(report.ignored, ", "));
  std::cout << fmt::format("tokenizer     {}\n", tokenizer_files.empty() ? "no tokenizer files" : fmt::format("{}", fmt::join(tokenizer_files, ", ")));
  return 0;
}

}  // namespace hpctrain::cli
