// The Accelerator (accelerator.hpp): device and threads, prepare, backward, accumulation, clipping,
// metric gathering and rank-0 checkpoints.
#include "hpctrain/train/accelerator.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/checkpointing.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/models/weights.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/device.hpp"
#include "hpctrain/train/threads.hpp"
#include "streamed_save.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

// Note [Streamed writes]: the weights of `model` as `views` (pretrained_layout) lists them, each made whole (stage 3
// gathers its unit) and, on rank 0, in the file's dtype.
StreamedPart model_part(parallel::Strategy& strategy, dist::Comm& comm, const models::Model& model,
                        const std::vector<io::TensorView>& views, std::optional<at::ScalarType> save_dtype) {
  std::vector<at::Tensor> tensors;  // in views' order: state_dict's
  for (const auto& [name, tensor] : models::state_dict(model)) tensors.push_back(tensor);
  return StreamedPart{io::save_sharded_order(views), [&strategy, &comm, tensors, save_dtype](std::size_t i) {
                        strategy.make_whole(tensors.at(i));
                        return comm.is_main_process() ? models::host_tensor(tensors[i], save_dtype) : at::Tensor();
                      }};
}

// Transformers' gradient_checkpointing_enable(): only models with transformer layers support it.
void enable_gradient_checkpointing(torch::nn::Module& model) {
  auto* known = dynamic_cast<models::Model*>(&model);
  HPCTRAIN_CHECK(known != nullptr && !known->transformer_layers().empty(),
                 "--gradient-checkpointing: {} has no transformer layers to checkpoint (DistilBERT and BERT have)",
                 known != nullptr ? known->spec().architecture : model.name());
  models::set_gradient_checkpointing(*known, true);
}

using models::TensorMap;

TensorMap model_tensors(const torch::nn::Module& model) {
  TensorMap out;
  for (const auto& [name, tensor] : models::state_dict(model)) out.emplace(name, tensor);
  return out;
}

// Rank 0 reads tensors (`read`), every rank receives them; a read error is thrown on every rank.
TensorMap read_on_root(dist::Comm& comm, const std::string& what, const std::function<TensorMap()>& read) {
  TensorMap tensors;
  dist::run_collectively(comm, what, [&] {
    if (comm.is_main_process()) tensors = read();
  });
  return ddp::broadcast_tensors(comm, tensors, 0);
}

}  // namespace

Accelerator::Accelerator(dist::Comm& comm, AcceleratorOptions options) : comm_(comm), options_(std::move(options)) {
  core::tune_host_allocator();  // Note [Host allocator]; custom loops may not have called it
  log::Context context = log::context();
  context.rank = comm_.rank();
  context.world_size = comm_.world_size();
  context.all_ranks = options_.log_all_ranks;
  log::set_context(context);
  HPCTRAIN_CHECK(options_.gradient_accumulation_steps >= 1, "gradient_accumulation_steps {}: expected >= 1",
                 options_.gradient_accumulation_steps);
  HPCTRAIN_CHECK(options_.local_sgd_steps >= 0, "local_sgd_steps {}: expected >= 0 (0 = off)", options_.local_sgd_steps);
  comm_.set_collective_timeout(options_.collective_timeout);
  threads_ = apply_threads(options_.threads, comm_.local_size());  // warns when far too many
  device_ = select_device(options_.device, comm_);
  use_device(device_);  // Note [Current device]: before any CUDA work; refuses CUDA in a build without it
  precision_ = PrecisionPolicy(options_.mixed_precision, options_.loss_scaling, options_.grad_reduce_dtype,
                               device_.type());
  if (const std::string note = precision_.startup_note(); !note.empty()) log::info("{}", note);
  scale_.scaler = precision_.scaler();
  strategy_ = parallel::make_strategy(parallel::StrategyContext{comm_, options_, precision_, device_});
}

Accelerator::~Accelerator() = default;

void Accelerator::prepare_model(torch::nn::Module& model) {
  HPCTRAIN_CHECK(model_ == nullptr, "Accelerator::prepare_model: a model is already prepared (one per Accelerator)");
  strategy_->prepare_model(model);
  if (options_.gradient_checkpointing) enable_gradient_checkpointing(model);
  model_ = &model;
}

std::unique_ptr<optim::Optimizer> Accelerator::make_optimizer(const optim::OptimizerOptions& options,
                                                              const optim::NamedParameters& named) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::make_optimizer: call prepare_model(model) first");
  const std::set<std::string> no_decay = models::no_weight_decay_parameters(*model_);  // Note [Weight decay groups]
  std::unique_ptr<optim::Optimizer> made = strategy_->make_optimizer(options, named, no_decay);
  register_optimizer(*made);
  return made;
}

std::unique_ptr<loader::ShardLoader> Accelerator::prepare_data(const fs::path& file, loader::LoaderOptions options) {
  options.rank = comm_.rank();
  options.world_size = comm_.world_size();
  options.pin_memory = device_.is_cuda();  // asynchronous host-to-device copies (evaluation.cpp's on())
  std::unique_ptr<loader::ShardLoader> loader;
  // Agree before anyone reads: the first failing rank's message reaches every rank.
  dist::run_collectively(comm_, fmt::format("opening split '{}' of '{}'", options.split, file.string()),
                         [&] { loader = std::make_unique<loader::ShardLoader>(file, options); });
  return loader;
}

std::unique_ptr<loader::ShardLoader> Accelerator::prepare(torch::nn::Module& model, optim::Optimizer& optimizer, const fs::path& file,
                                                          loader::LoaderOptions options) {
  if (model_ == nullptr) prepare_model(model);
  HPCTRAIN_CHECK(model_ == &model, "Accelerator::prepare: another model was prepared before");
  for (const auto& [name, state] : optimizer.state_dict()) {
    HPCTRAIN_CHECK(name == "step" || state.device() == device_,
                   "Accelerator::prepare: the optimizer's state '{}' is on {}, the model on {}\n  hint: build the optimizer "
                   "after prepare_model(model) (or after model.to(accelerator.device()))", name, state.device().str(),
                   device_.str());
  }
  register_optimizer(optimizer);
  return prepare_data(file, std::move(options));
}

void Accelerator::backward(const at::Tensor& loss) {
  if (const DynamicLossScaler* scaler = precision_.scaler())
    (loss * scaler->scale()).backward();
  else
    loss.backward();
  if (model_ == nullptr) return;
  strategy_->after_backward();
  if (reducer().sync()) log_warnings(reducer().finalize());
}

bool Accelerator::accumulate(bool end_of_step) {
  ++micro_batches_;
  const bool sync = end_of_step || micro_batches_ >= options_.gradient_accumulation_steps;
  if (sync) micro_batches_ = 0;
  set_gradient_sync(sync);
  return sync;
}

bool Accelerator::sync_gradients() const { return sync_; }

ddp::NoSyncScope Accelerator::no_sync() { return ddp::NoSyncScope(reducer()); }

void Accelerator::set_gradient_sync(bool sync) {
  sync_ = sync;
  reducer().set_sync(sync && options_.local_sgd_steps == 0);
}

bool Accelerator::local_sgd_step() {
  if (options_.local_sgd_steps == 0) return false;
  if (++local_steps_ < options_.local_sgd_steps) return false;
  synchronize_parameters();
  return true;
}

void Accelerator::synchronize_parameters() {
  if (parameters_synchronized()) return;
  strategy_->average_parameters();
  local_steps_ = 0;
}

bool Accelerator::unscale_gradients() { return strategy_->unscale_gradients(scale_); }

void Accelerator::update_loss_scale() {
  DynamicLossScaler* scaler = precision_.scaler();
  if (scaler != nullptr && scale_.unscaled) scaler->update(scale_.found_inf);
  scale_.unscaled = scale_.found_inf = false;
}

std::optional<double> Accelerator::loss_scale() const {
  const DynamicLossScaler* scaler = precision_.scaler();
  return scaler ? std::optional<double>(scaler->scale()) : std::nullopt;
}

double Accelerator::clip_grad_norm(double max_norm) { return strategy_->clip_grad_norm(max_norm, scale_); }

StepOutcome Accelerator::optimizer_step(double lr, double max_grad_norm) {
  HPCTRAIN_CHECK(optimizer_ != nullptr, "Accelerator::optimizer_step: no optimizer registered (prepare() or "
                 "register_optimizer() first)");
  StepOutcome outcome;
  outcome.lr = lr;
  strategy_->step(*optimizer_, lr, max_grad_norm, scale_, outcome);
  update_loss_scale();
  zero_grad();
  outcome.loss_scale = loss_scale();
  return outcome;
}

StepOutcome Accelerator::skip_step(double lr) {
  set_gradient_sync(true);  // the micro-batches after the skipped one ran no backward
  update_loss_scale();      // nothing was unscaled: the scale stays
  zero_grad();
  StepOutcome outcome;
  outcome.result = StepOutcome::Result::skipped_nonfinite_loss;
  outcome.lr = lr;
  outcome.loss_scale = loss_scale();
  return outcome;
}

void Accelerator::zero_grad() {
  if (model_ != nullptr) strategy_->zero_grad();
}

at::Tensor Accelerator::gather_for_metrics(const at::Tensor& values, const at::Tensor& is_padding) {
  HPCTRAIN_CHECK(values.dim() >= 1 && is_padding.dim() == 1 && is_padding.size(0) == values.size(0),
                 "gather_for_metrics: values [n, ...] and is_padding [n] must agree (got {} and {})",
                 fmt::join(values.sizes(), "x"), fmt::join(is_padding.sizes(), "x"));
  const at::Tensor kept = values.index({is_padding.to(at::kCPU).to(at::kBool).logical_not().to(values.device())})
                              .to(at::kCPU).contiguous();
  const auto rows = comm_.allgather_value<int64_t>(kept.size(0));
  const int64_t longest = *std::max_element(rows.begin(), rows.end());
  std::vector<int64_t> row_shape = values.sizes().vec();
  row_shape[0] = longest;
  at::Tensor padded = at::zeros(row_shape, kept.options());
  if (kept.size(0) > 0) padded.narrow(0, 0, kept.size(0)).copy_(kept);
  row_shape[0] = longest * comm_.world_size();
  at::Tensor all = at::empty(row_shape, kept.options());
  comm_.allgather(padded.data_ptr(), padded.nbytes(), all.data_ptr());
  std::vector<at::Tensor> pieces;
  for (int r = 0; r < comm_.world_size(); ++r) pieces.push_back(all.narrow(0, r * longest, rows[static_cast<std::size_t>(r)]));
  return at::cat(pieces, 0);
}

void Accelerator::seed_step(int64_t step, int64_t micro_batch) {
  // Note [Dropout seeds]: a pure function of (seed, step, micro-batch, rank); nothing else reseeds or
  // depends on LibTorch's generator during training, so a resumed run draws the same masks.
  const uint64_t per_step = derive_seed(options_.seed, static_cast<uint64_t>(step), static_cast<uint64_t>(micro_batch));
  torch::manual_seed(derive_seed(per_step, static_cast<uint64_t>(comm_.rank()), 0x5eedull));
}

void Accelerator::save_state(const fs::path& dir, const nlohmann::json& trainer_state) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::save_state: no model prepared");
  const auto* known = dynamic_cast<const models::Model*>(model_);
  // Note [Streamed writes]: the weights and the optimizer state tensor by tensor (stage 3 gathers one unit at a
  // time, stages 1-3 one state tensor at a time); other models' files from their whole tensors.
  const bool streamed = known != nullptr && !model_files_;
  std::vector<StreamedPart> parts;
  std::vector<io::TensorView> weights;
  if (streamed) {
    weights = models::pretrained_layout(*known, std::nullopt);
    parts.push_back(model_part(*strategy_, comm_, *known, weights, std::nullopt));
  }
  parallel::Strategy::StateToSave state;  // Note [ZeRO checkpoints]
  std::vector<io::TensorView> state_views;
  if (optimizer_ != nullptr) {
    state = strategy_->optimizer_state_to_save(*optimizer_);
    state_views = models::layout_views(state.layout);
    parts.push_back(StreamedPart{io::save_order(state_views), [&](std::size_t i) {
                                   const at::Tensor whole = state.fetch(state_views[i].name);
                                   return whole.defined() ? models::host_tensor(whole) : whole;
                                 }});
  }
  const auto write_rest = [&](const fs::path& tmp) {
    if (const DynamicLossScaler* scaler = precision_.scaler())
      write_text(tmp / kScalerName, scaler->to_json().dump(2) + "\n");
    if (!trainer_state.is_null()) write_text(tmp / kTrainerStateName, trainer_state.dump(2) + "\n");
    write_manifest(tmp);  // last: it covers every other file (Note [Verified checkpoints])
  };
  const std::string what = fmt::format("saving '{}' on rank 0", dir.string());
  if (!streamed) {
    optim::OptimizerState whole_state;  // on rank 0
    for (const std::size_t i : optimizer_ != nullptr ? parts.back().order : std::vector<std::size_t>{}) {
      at::Tensor tensor = parts.back().fetch(i);
      if (comm_.is_main_process()) whole_state[state_views[i].name] = tensor;
    }
    with_whole_model([&] {
      dist::run_collectively(comm_, what, [&] {  // every rank learns the outcome: no rank runs ahead of a failed save
        if (!comm_.is_main_process()) return;
        io::write_folder_atomically(dir, [&](const fs::path& tmp) {
          if (model_files_) model_files_->write(tmp);
          else models::save_tensor_file(tmp / kModelWeightsName, model_tensors(*model_));
          if (optimizer_ != nullptr)  // Note [Optimizer checkpoints]
            optim::save_optimizer_file(tmp / kOptimizerName, *optimizer_, whole_state);
          write_rest(tmp);
        });
      });
    }, /*keep_changes=*/false);
    return;
  }
  write_streamed(comm_, what, parts, [&](const std::vector<io::TensorData>& data) {
    io::write_folder_atomically(dir, [&](const fs::path& tmp) {
      models::write_pretrained_files(*known, tmp, tokenizer_files_, std::nullopt, data[0]);
      if (optimizer_ != nullptr)  // Note [Optimizer checkpoints]
        optim::save_optimizer_file(tmp / kOptimizerName, *optimizer_, state.layout, data[1]);
      write_rest(tmp);
    });
  });
  strategy_->end_whole_tensors();
}

void Accelerator::save_pretrained(const models::Model& model, const fs::path& dir,
                                  const std::vector<fs::path>& tokenizer_files, std::optional<at::ScalarType> save_dtype) {
  const std::vector<io::TensorView> weights = models::pretrained_layout(model, save_dtype);
  write_streamed(comm_, fmt::format("saving '{}' on rank 0", dir.string()),
                 {model_part(*strategy_, comm_, model, weights, save_dtype)},
                 [&](const std::vector<io::TensorData>& data) {
                   models::save_pretrained(model, dir, tokenizer_files, save_dtype, data[0]);
                 });
  strategy_->end_whole_tensors();
}

nlohmann::json Accelerator::load_state(const fs::path& dir) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::load_state: no model prepared");
  std::string state_text;
  dist::run_collectively(comm_, fmt::format("verifying '{}'", dir.string()), [&] {
    if (!comm_.is_main_process()) return;
    state_text = read_verified_trainer_state(dir);
  });
  comm_.broadcast_string(state_text, 0);
  load_tensors(dir);
  return state_text.empty() ? nlohmann::json(nullptr) : io::parse_json_text(state_text, (dir / kTrainerStateName).string());
}

void Accelerator::load_tensors(const fs::path& dir) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::load_tensors: no model prepared");
  const bool hf_model = dynamic_cast<const models::Model*>(model_) != nullptr;
  const TensorMap weights = read_on_root(comm_, fmt::format("reading the model weights in '{}'", dir.string()), [&] {
    if (model_files_) return model_files_->read(dir);
    if (!hf_model) return models::load_tensor_file(dir / kModelWeightsName);
    const models::StateDict stored = models::read_weights(dir);  // model.safetensors or its shards
    return TensorMap(stored.begin(), stored.end());
  });
  with_whole_model([&] {  // stage 3: into every rank's shards
    models::copy_tensors_strict(weights, model_files_ ? model_files_->tensors() : model_tensors(*model_),
                                fmt::format("model weights in '{}'", dir.string()));
  }, /*keep_changes=*/true);
  if (optimizer_ != nullptr) {
    const fs::path file = dir / kOptimizerName;
    const TensorMap state = read_on_root(comm_, fmt::format("reading '{}'", file.string()), [&] {
      std::string note;
      TensorMap read = optim::read_optimizer_file(file, *optimizer_, &note);  // Note [Optimizer checkpoints]
      if (!note.empty()) log::warning("{}", note);
      return read;
    });
    optimizer_->load_state_dict(std::map<std::string, at::Tensor>(state.begin(), state.end()));
  }
  if (precision_.scaler() != nullptr) load_scaler(dir);
}

// Rank 0 reads `dir`/scaler.json, every rank loads the same state; a folder without it keeps the scale.
void Accelerator::load_scaler(const fs::path& dir) {
  const fs::path file = dir / kScalerName;
  std::string text;
  dist::run_collectively(comm_, fmt::format("reading '{}'", file.string()), [&] {
    if (comm_.is_main_process() && fs::is_regular_file(file)) text = read_text(file);
  });
  comm_.broadcast_string(text, 0);
  if (text.empty()) {
    log::info("{}: no loss scaler state; starting from scale {}", dir.string(), precision_.scaler()->scale());
    return;
  }
  precision_.scaler()->load_json(io::parse_json_text(text, file.string()), file.string());
}

void Accelerator::print_line(const std::string& line) { log::write_info(line); }

ddp::GradientReducer& Accelerator::reducer() { return strategy_->reducer(); }

void Accelerator::with_whole_model(const std::function<void()>& use, bool keep_changes) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::with_whole_model: no model prepared");
  strategy_->with_whole_model(use, keep_changes);
}

int64_t Accelerator::model_state_bytes() { return model_ != nullptr ? strategy_->model_state_bytes(optimizer_) : 0; }

torch::nn::Module& Accelerator::model() {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator: prepare_model() first");
  return *model_;
}

void Accelerator::log_warnings(const std::string& warnings) {
  std::istringstream lines(warnings);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && logged_warnings_.insert(line).second) log::warning("{}", line);
  }
}

}  // namespace hpctrain::train
