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

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

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
  const optim::OptimizerState optimizer_state =  // Note [ZeRO checkpoints]: gathered to rank 0 when sharded
      optimizer_ != nullptr ? strategy_->optimizer_state_to_save(*optimizer_) : optim::OptimizerState{};
  with_whole_model([&] {  // stage 3: gathered for rank 0 to write
    // Every rank learns the outcome: no rank runs ahead of a failed save.
    dist::run_collectively(comm_, fmt::format("saving '{}' on rank 0", dir.string()), [&] {
      if (!comm_.is_main_process()) return;
      io::write_folder_atomically(dir, [&](const fs::path& tmp) {
        if (model_files_)
          model_files_->write(tmp);
        else if (const auto* known = dynamic_cast<const models::Model*>(model_))
          models::write_pretrained_files(*known, tmp, tokenizer_files_);
        else
          models::save_tensor_file(tmp / kModelWeightsName, model_tensors(*model_));
        if (optimizer_ != nullptr)  // Note [Optimizer checkpoints]
          optim::save_optimizer_file(tmp / kOptimizerName, *optimizer_, optimizer_state);
        if (const DynamicLossScaler* scaler = precision_.scaler())
          write_text(tmp / kScalerName, scaler->to_json().dump(2) + "\n");
        if (!trainer_state.is_null()) write_text(tmp / kTrainerStateName, trainer_state.dump(2) + "\n");
        write_manifest(tmp);  // last: it covers every other file (Note [Verified checkpoints])
      });
    });
  }, /*keep_changes=*/false);
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
