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
#include <sstream>

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
#include "hpctrain/train/zero_optimizer.hpp"
#include "sum_of_squares.hpp"

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

int64_t mib_to_bytes(double mib) { return static_cast<int64_t>(mib * 1024.0 * 1024.0); }

// Parameters and buffers by name (buffers after parameters), as prepare_model checks and broadcasts them.
ddp::NamedTensors parameters_and_buffers(torch::nn::Module& model) {
  ddp::NamedTensors named;
  for (const auto& item : model.named_parameters()) named.emplace_back(item.key(), item.value());
  for (const auto& item : model.named_buffers()) named.emplace_back("buffer:" + item.key(), item.value());
  return named;
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
  HPCTRAIN_CHECK(options_.zero_stage >= 0 && options_.zero_stage <= 2, "--zero-stage {}: expected 0, 1 or 2",
                 options_.zero_stage);
  HPCTRAIN_CHECK(options_.zero_stage == 0 || options_.local_sgd_steps == 0, "--local-sgd-steps {} with --zero-stage {} "
                 "is not supported: Local SGD keeps a whole optimizer per rank and averages parameters, ZeRO shards the "
                 "optimizer over ranks that step together\n  hint: drop one of the two options", options_.local_sgd_steps,
                 options_.zero_stage);
  comm_.set_collective_timeout(options_.collective_timeout);
  threads_ = apply_threads(options_.threads, comm_.local_size());  // warns when far too many
  device_ = select_device(options_.device, comm_);
  use_device(device_);  // Note [Current device]: before any CUDA work; refuses CUDA in a build without it
  precision_ = PrecisionPolicy(options_.mixed_precision, options_.loss_scaling, options_.grad_reduce_dtype,
                               device_.type());
  if (const std::string note = precision_.startup_note(); !note.empty()) log::info("{}", note);
}

Accelerator::~Accelerator() = default;

void Accelerator::prepare_model(torch::nn::Module& model) {
  HPCTRAIN_CHECK(model_ == nullptr, "Accelerator::prepare_model: a model is already prepared (one per Accelerator)");
  model.to(device_);
  const ddp::NamedTensors named = parameters_and_buffers(model);
  ddp::check_same_structure(comm_, named);
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  ddp::broadcast_parameters(comm_, tensors, 0);
  ddp::NamedTensors trainable;
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;
    trainable.emplace_back(item.key(), item.value());
    trainable_.push_back(item.value());
  }
  ddp::ReducerOptions reducer_options;
  reducer_options.first_bucket_bytes = mib_to_bytes(options_.first_bucket_mb);
  reducer_options.bucket_bytes = mib_to_bytes(options_.bucket_mb);
  reducer_options.overlap = options_.overlap;
  reducer_options.wire_dtype = precision_.gradient_wire_dtype();
  reducer_ = std::make_unique<ddp::GradientReducer>(comm_, std::move(trainable), reducer_options);
  if (options_.local_sgd_steps > 0) reducer_->set_sync(false);  // Note [Local SGD]: no gradient averaging
  if (options_.gradient_checkpointing) enable_gradient_checkpointing(model);
  model_ = &model;
}

std::unique_ptr<optim::Optimizer> Accelerator::make_optimizer(const optim::OptimizerOptions& options,
                                                              const optim::NamedParameters& named) {
  HPCTRAIN_CHECK(model_ != nullptr, "Accelerator::make_optimizer: call prepare_model(model) first");
  const std::set<std::string> no_decay = models::no_weight_decay_parameters(*model_);  // Note [Weight decay groups]
  std::unique_ptr<optim::Optimizer> made;
  if (!zero_active()) {
    if (options_.zero_stage > 0) log::info("--zero-stage {}: one rank, nothing to shard (runs as stage 0)", options_.zero_stage);
    made = optim::make_optimizer(options, named, no_decay);
  } else {
    std::vector<int64_t> alignments;  // Note [ZeRO slices]
    for (const at::Tensor& param : reducer().parameters()) alignments.push_back(optim::segment_alignment(options, param.numel()));
    reducer().enable_zero(options_.zero_stage, alignments);
    auto zero = std::make_unique<ZeroOptimizer>(
        comm_, reducer(), optim::weight_decay_groups(named, options.weight_decay, no_decay),
        [&](std::vector<optim::ParameterGroup> groups, const std::vector<int64_t>& numels) {
          return optim::make_segment_optimizer(options, std::move(groups), numels);
        });
    log::info("ZeRO stage {}: this rank keeps {} of {} optimizer-state bytes", options_.zero_stage, zero->state_bytes(),
              zero->whole_state_bytes());
    made = std::move(zero);
  }
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
  if (reducer_ && reducer_->sync()) log_warnings(reducer_->finalize());
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
  reducer().average_parameters();
  local_steps_ = 0;
}

// Note [Found-inf agreement]
// A step is skipped on every rank or on none, yet found_inf costs no collective of its own: it is read
// from the averaged gradients, after the reducer's allreduce. A rank's inf or NaN makes the sum inf or
// NaN on every rank whatever the summation order (inf + finite = inf, inf - inf = NaN, NaN + x = NaN;
// row-sparse buckets count NaN as non-zero, Note [Row-sparse buckets]), and every rank receives the
// same averaged bits (the replicas stay equal, which --check-sync-every verifies), so every rank reads
// the same flag. Gradients that were never reduced (a step with sync off) would break this: the trainer
// unscales only after a synced micro-batch. Local SGD without a gradient allreduce needs the flag in its
// own reduction.
bool Accelerator::unscale_gradients() {
  HPCTRAIN_CHECK(!zero_active(), "Accelerator::unscale_gradients with --zero-stage {}: the gradients are sharded; "
                 "optimizer_step() unscales them", options_.zero_stage);
  const DynamicLossScaler* scaler = precision_.scaler();
  if (scaler == nullptr || unscaled_) return found_inf_;
  at::NoGradGuard no_grad;
  const double inverse = 1.0 / scaler->scale();
  std::vector<at::Tensor> nonfinite;
  for (const at::Tensor& param : trainable_) {
    if (!param.grad().defined()) continue;
    at::Tensor grad = param.grad();
    grad.mul_(inverse);
    nonfinite.push_back(at::isfinite(grad).logical_not().any());
  }
  found_inf_ = !nonfinite.empty() && at::stack(nonfinite).any().item<bool>();
  unscaled_ = true;
  return found_inf_;
}

void Accelerator::update_loss_scale() {
  DynamicLossScaler* scaler = precision_.scaler();
  if (scaler != nullptr && unscaled_) scaler->update(found_inf_);
  unscaled_ = found_inf_ = false;
}

std::optional<double> Accelerator::loss_scale() const {
  const DynamicLossScaler* scaler = precision_.scaler();
  return scaler ? std::optional<double>(scaler->scale()) : std::nullopt;
}

double Accelerator::clip_grad_norm(double max_norm) {
  HPCTRAIN_CHECK(!zero_active(), "Accelerator::clip_grad_norm with --zero-stage {}: the gradients are sharded; "
                 "optimizer_step(lr, max_grad_norm) clips them", options_.zero_stage);
  (void)unscale_gradients();  // clipping sees unscaled gradients (Accelerate's clip_grad_norm_)
  at::NoGradGuard no_grad;
  at::Tensor squares;  // float64, Note [Gradient norm in float64]
  for (const at::Tensor& param : trainable_) {
    if (param.grad().defined()) detail::add_sum_of_squares(squares, param.grad());
  }
  if (!squares.defined()) return 0.0;
  const double total = std::sqrt(squares.item<double>());
  // torch.nn.utils.clip_grad_norm_: scale by max_norm / (total + 1e-6) when that is below 1.
  const double coefficient = max_norm / (total + 1e-6);
  if (max_norm > 0 && coefficient < 1.0) {
    for (const at::Tensor& param : trainable_) {
      if (param.grad().defined()) param.grad().mul_(coefficient);
    }
  }
  return total;
}

StepOutcome Accelerator::optimizer_step(double lr, double max_grad_norm) {
  HPCTRAIN_CHECK(optimizer_ != nullptr, "Accelerator::optimizer_step: no optimizer registered (prepare() or "
                 "register_optimizer() first)");
  if (zero_active()) return zero_step(lr, max_grad_norm);
  StepOutcome outcome;
  outcome.lr = lr;
  if (unscale_gradients()) {  // Note [Found-inf agreement]: the same on every rank
    outcome.result = StepOutcome::Result::skipped_overflow;
  } else {
    outcome.grad_norm = clip_grad_norm(max_grad_norm);
    optimizer_->step(lr);
  }
  update_loss_scale();
  zero_grad();
  outcome.loss_scale = loss_scale();
  return outcome;
}

// Note [The step protocol] with ZeRO: the ranks agree on overflow through the one allreduce of the global
// sum of squares (computed in float64, so only an inf or NaN gradient makes it non-finite), instead of
// Note [Found-inf agreement]'s replicated gradients, which no rank has any more.
StepOutcome Accelerator::zero_step(double lr, double max_grad_norm) {
  auto* zero = dynamic_cast<ZeroOptimizer*>(optimizer_);
  HPCTRAIN_CHECK(zero != nullptr, "Accelerator::optimizer_step with --zero-stage {}: the registered optimizer is not "
                 "sharded; build it with Accelerator::make_optimizer", options_.zero_stage);
  StepOutcome outcome;
  outcome.lr = lr;
  const DynamicLossScaler* scaler = precision_.scaler();
  const double squares = zero->unscaled_sum_of_squares(scaler != nullptr ? 1.0 / scaler->scale() : 1.0);
  unscaled_ = scaler != nullptr;
  found_inf_ = scaler != nullptr && !std::isfinite(squares);
  if (found_inf_) {
    outcome.result = StepOutcome::Result::skipped_overflow;
  } else {
    outcome.grad_norm = std::sqrt(squares);
    const double coefficient = max_grad_norm / (outcome.grad_norm + 1e-6);  // as clip_grad_norm
    if (max_grad_norm > 0 && coefficient < 1.0) zero->scale_gradients(coefficient);
    optimizer_->step(lr);
  }
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
  for (at::Tensor& param : trainable_) param.mutable_grad() = at::Tensor();
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
  const auto* zero = dynamic_cast<const ZeroOptimizer*>(optimizer_);
  const optim::OptimizerState gathered = zero != nullptr ? zero->gather_state() : optim::OptimizerState{};  // Note [ZeRO checkpoints]
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
      if (zero != nullptr)
        optim::save_optimizer_file(tmp / kOptimizerName, *optimizer_, gathered);
      else if (optimizer_ != nullptr)
        optim::save_optimizer_file(tmp / kOptimizerName, *optimizer_);  // Note [Optimizer checkpoints]
      if (const DynamicLossScaler* scaler = precision_.scaler())
        write_text(tmp / kScalerName, scaler->to_json().dump(2) + "\n");
      if (!trainer_state.is_null()) write_text(tmp / kTrainerStateName, trainer_state.dump(2) + "\n");
      write_manifest(tmp);  // last: it covers every other file (Note [Verified checkpoints])
    });
  });
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
  models::copy_tensors_strict(weights, model_files_ ? model_files_->tensors() : model_tensors(*model_),
                              fmt::format("model weights in '{}'", dir.string()));
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

ddp::GradientReducer& Accelerator::reducer() {
  HPCTRAIN_CHECK(reducer_ != nullptr, "Accelerator: prepare_model() first");
  return *reducer_;
}

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
