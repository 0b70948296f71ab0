// The Accelerator: Hugging Face Accelerate's API in C++, the layer `hpctrain train` and custom loops share.
// It binds the rank to a device and CPU threads, prepares a model (rank 0's weights broadcast, structure
// checked, gradient reducer installed), an optimizer and this rank's shard of a dataset, and does
// backward with gradient averaging, accumulation, clipping, metric gathering and rank-0 checkpointing.
// Every method that communicates is collective: all ranks call it at the same point.
//
// Typical loop (examples/custom_loop.cpp):
//   Accelerator acc(comm, options);
//   acc.prepare_model(*model);                       // before building the optimizer (device moves)
//   auto optimizer = acc.make_optimizer(optimizer_options, model->named_parameters().pairs());  // or AdamW(...)
//   auto loader = acc.prepare(*model, *optimizer, "data.h5", loader_options);
//   loader->start_epoch(epoch);
//   while (auto batch = loader->next()) {
//     if (!acc.accumulate(end_of_epoch)) { acc.backward(loss); continue; }
//     acc.backward(loss);
//     const StepOutcome outcome = acc.optimizer_step(lr, /*max_grad_norm=*/1.0);  // Note [The step protocol]
//   }
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/loader/shard_loader.hpp"
#include "hpctrain/train/accelerator_options.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/precision.hpp"

namespace hpctrain::models {
class Model;
}  // namespace hpctrain::models

namespace hpctrain::train {

// Accelerator::autocast(): the policy's autocast region while it lives; nothing without mixed precision.
class AutocastRegion {
 public:
  explicit AutocastRegion(const PrecisionPolicy& policy) {
    if (const auto dtype = policy.autocast_dtype()) scope_.emplace(policy.device(), true, *dtype);
  }

 private:
  std::optional<compat::AutocastScope> scope_;
};

// How a checkpoint holds the model, when not whole (set_model_files): an adapter run (Note [LoRA]) keeps only
// its trainable tensors and names its frozen base. Names are the model's parameter names.
class ModelFiles {
 public:
  virtual ~ModelFiles() = default;
  // Rank 0: writes the model's part of a checkpoint into `dir` (an existing, empty temporary folder).
  virtual void write(const std::filesystem::path& dir) const = 0;
  // Rank 0: the tensors write() stored in `dir`, by the names of tensors(); Error when they cannot belong here.
  [[nodiscard]] virtual std::map<std::string, at::Tensor> read(const std::filesystem::path& dir) const = 0;
  // The live tensors read() fills.
  [[nodiscard]] virtual std::map<std::string, at::Tensor> tensors() const = 0;
};

class Accelerator {
 public:
  // Sets the log context, CPU threads (train::set_threads), the collective timeout, picks the device and
  // the precision policy (Error naming --mixed-precision for fp16 without CUDA). Not collective.
  Accelerator(dist::Comm& comm, AcceleratorOptions options = {});
  ~Accelerator();
  Accelerator(const Accelerator&) = delete;
  Accelerator& operator=(const Accelerator&) = delete;

  [[nodiscard]] const at::Device& device() const { return device_; }
  [[nodiscard]] int rank() const { return comm_.rank(); }
  [[nodiscard]] int world_size() const { return comm_.world_size(); }
  [[nodiscard]] int local_rank() const { return comm_.local_rank(); }
  [[nodiscard]] bool is_main_process() const { return comm_.is_main_process(); }
  [[nodiscard]] int threads() const { return threads_; }
  [[nodiscard]] dist::Comm& comm() { return comm_; }
  [[nodiscard]] const AcceleratorOptions& options() const { return options_; }

  // Collective. Moves `model` to device(), checks that every rank holds the same parameter and buffer
  // names, shapes and dtypes (Error on every rank otherwise), copies rank 0's values to every rank and
  // installs the gradient reducer on the parameters that require grad. Once per Accelerator.
  void prepare_model(torch::nn::Module& model);
  // Collective. This rank's ShardLoader of `file` (options.rank / world_size are set here). When any
  // rank fails to open its shard, every rank throws the first failing rank's message.
  [[nodiscard]] std::unique_ptr<loader::ShardLoader> prepare_data(const std::filesystem::path& file,
                                                                  loader::LoaderOptions options);
  // Accelerate's prepare(model, optimizer, data): prepare_model (when not done yet), registers the
  // optimizer for save_state/load_state (its state must live on device()), prepare_data.
  [[nodiscard]] std::unique_ptr<loader::ShardLoader> prepare(torch::nn::Module& model, optim::Optimizer& optimizer,
                                                             const std::filesystem::path& file,
                                                             loader::LoaderOptions options);
  void register_optimizer(optim::Optimizer& optimizer) { optimizer_ = &optimizer; }
  // Collective, after prepare_model: the optimizer options.optim names over `named` (weight_decay_groups, no
  // decay for the prepared model's norm weights and biases: Note [Weight decay groups]), registered, made by the
  // parallelism strategy (parallel/strategy.hpp): with options().zero_stage 1 to 3 on more than one rank a
  // ZeroOptimizer (zero_optimizer.hpp) that keeps state for this rank's slices only; make_optimizer(options, named,
  // no_decay) otherwise.
  [[nodiscard]] std::unique_ptr<optim::Optimizer> make_optimizer(const optim::OptimizerOptions& options,
                                                                 const optim::NamedParameters& named);

  // Accelerate's autocast(): wrap forward and loss in it (`auto region = acc.autocast();`). Under bf16 the
  // matrix products run in bf16 on float32 weights (cast copies); LayerNorm, softmax and the loss stay fp32.
  [[nodiscard]] AutocastRegion autocast() const { return AutocastRegion(precision_); }
  [[nodiscard]] const PrecisionPolicy& precision() const { return precision_; }

  // loss.backward() (of loss * loss_scale() when the loss is scaled); on a synced micro-batch the gradients are then averaged over all ranks
  // (collective); a CPU parameter's .grad is then a view of the reducer's buffer, overwritten by the next
  // synced backward (Note [Gradients as bucket views]). Reducer warnings (e.g. parameters without a
  // gradient) are logged once each.
  void backward(const at::Tensor& loss);
  // Gradient accumulation, as Accelerate's accumulate(): call once per micro-batch before its forward.
  // Sync is on for every gradient_accumulation_steps-th micro-batch, or when `end_of_step` (e.g. the
  // last micro-batch of an epoch). Returns sync_gradients(): whether to step the optimizer after it.
  bool accumulate(bool end_of_step = false);
  [[nodiscard]] bool sync_gradients() const;
  // Turns gradient sync off for its lifetime (DDP's no_sync()).
  [[nodiscard]] ddp::NoSyncScope no_sync();
  void set_gradient_sync(bool sync);

  // Loss scaling (PrecisionPolicy::scaler()): divides the averaged gradients by the scale once per step and
  // returns whether any is inf/NaN (found_inf; later calls in the step return the same). Agreed without a
  // collective of its own: Note [Found-inf agreement] (src/train/parallel/replicated.cpp). Without loss scaling: false, nothing done.
  [[nodiscard]] bool unscale_gradients();
  // After every optimizer step, taken or skipped on found_inf: the scaler's update (GradScaler.update()).
  void update_loss_scale();
  // The scale the next backward multiplies the loss by; nullopt without loss scaling.
  [[nodiscard]] std::optional<double> loss_scale() const;

  // Local SGD (options.local_sgd_steps = K > 0, Accelerate's LocalSGD): backward never averages gradients,
  // each rank steps on its own; call local_sgd_step() once after every optimizer step (collective): every
  // K-th call averages the parameters over the ranks (Note [Local SGD] in src/ddp/gradient_reducer.cpp)
  // and returns true. Optimizer state stays local. A no-op returning false without local SGD.
  bool local_sgd_step();
  // Collective: averages the parameters now unless they are synchronized (see parameters_synchronized()),
  // for evaluation, checkpoints and the end of training. Every rank calls it at the same step.
  void synchronize_parameters();
  // True without local SGD, and with it when no optimizer step ran since the last average.
  [[nodiscard]] bool parameters_synchronized() const { return local_steps_ == 0; }

  // Note [The step protocol]
  // One optimizer step, after the backward of the step's last (synced) micro-batch, in the one order that
  // is right on every rank: unscale the averaged gradients (loss scaling) -> agree on overflow without a
  // collective (Note [Found-inf agreement]) -> clip to max_grad_norm (<= 0: measure only) -> the registered
  // optimizer's step(lr) -> the scaler's update (GradScaler.update(): halves on overflow, grows after its
  // interval) -> zero_grad. An overflowed step is skipped on every rank and leaves parameters and
  // optimizer state untouched. `hpctrain train` and custom loops both step through it, and it is the one
  // place a sharded optimizer plugs in: with ZeRO the unscale, the overflow agreement and the clipping work on
  // this rank's gradient slices with one allreduce of one number (the global sum of squares; not finite =
  // overflow), the step updates the slices and all-gathers the parameters (zero_optimizer.hpp). Needs
  // register_optimizer() (or prepare(); make_optimizer() with ZeRO).
  StepOutcome optimizer_step(double lr, double max_grad_norm);
  // A step every rank agreed to skip before backward finished (a non-finite loss under --skip-nonfinite):
  // drops the gradients, turns gradient sync back on, leaves the loss scale as it is.
  StepOutcome skip_step(double lr);

  // unscale_gradients() first; then scales the (already averaged, so identical on every rank) gradients of the prepared model so their
  // global L2 norm is at most max_norm, as torch.nn.utils.clip_grad_norm_; max_norm <= 0 only measures.
  // Returns the norm before clipping. Not collective.
  double clip_grad_norm(double max_norm);
  // Sets every parameter's gradient to none (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  // Collective. The rows of `values` ([n, ...], any dtype, any device) whose is_padding is false, from
  // every rank, concatenated in rank order on every rank (CPU). Ranks may hold different n.
  [[nodiscard]] at::Tensor gather_for_metrics(const at::Tensor& values, const at::Tensor& is_padding);

  // Note [Dropout seeds]: seeds LibTorch's generators with derive_seed(seed, step, micro_batch, rank)
  // before a micro-batch's forward, so a resumed run draws the same dropout masks as an uninterrupted one.
  void seed_step(int64_t step, int64_t micro_batch = 0);
  // The seed seed_step derives from (options().seed until then). A resumed run sets the checkpoint's seed,
  // so that its dropout masks continue the interrupted run's (Note [Dropout seeds]).
  void set_seed(uint64_t seed) { options_.seed = seed; }

  // Collective. Rank 0 writes `dir` atomically (checkpoint.hpp): the model through set_model_files' ModelFiles
  // when set (Note [LoRA]: the adapter only), else a models::Model as save_pretrained (config.json,
  // model.safetensors, tokenizer files), any other module as model.safetensors; optimizer.safetensors when one is registered; scaler.json with loss scaling;
  // trainer_state.json when
  // `trainer_state` is not null; last checksums.sha256 (Note [Verified checkpoints]). Returns after
  // every rank knows the folder is complete.
  void save_state(const std::filesystem::path& dir, const nlohmann::json& trainer_state = nullptr);
  // Collective. Rank 0 verifies `dir` against its checksums.sha256 (Error naming a corrupt file on every
  // rank), then load_tensors(dir). Returns trainer_state.json (null when absent).
  nlohmann::json load_state(const std::filesystem::path& dir);
  // Collective. Rank 0 reads `dir`, every rank receives: the model's weights and buffers (strict; or what the
  // ModelFiles read, into its tensors) and
  // the optimizer's state when registered, the loss scaler's when scaling and the folder has scaler.json
  // (a folder without it leaves the scale as it is). No verification: for callers that verified `dir` already.
  void load_tensors(const std::filesystem::path& dir);
  // Collective: models::save_pretrained of the prepared `model` by rank 0, its weights written tensor by tensor
  // (Note [Streamed writes] in src/train/streamed_save.cpp: with --zero-stage 3 one unit gathered at a time).
  void save_pretrained(const models::Model& model, const std::filesystem::path& dir,
                       const std::vector<std::filesystem::path>& tokenizer_files,
                       std::optional<at::ScalarType> save_dtype);
  // Tokenizer files save_state copies into model folders.
  void set_tokenizer_files(std::vector<std::filesystem::path> files) { tokenizer_files_ = std::move(files); }
  // How save_state and load_tensors hold the model; null (the default): whole, as described there.
  void set_model_files(std::shared_ptr<const ModelFiles> files) { model_files_ = std::move(files); }

  void wait_for_everyone() { comm_.barrier(); }

  // Prints on the main process only (every rank with log_all_ranks).
  template <typename... Args>
  void print(fmt::format_string<Args...> format, Args&&... args) {
    print_line(fmt::format(format, std::forward<Args>(args)...));
  }
  void print_line(const std::string& line);

  [[nodiscard]] ddp::GradientReducer& reducer();
  // Collective: runs `use` while every parameter of the prepared model holds its whole value on every rank (with
  // --zero-stage 3 they are gathered for it); with `keep_changes` what `use` wrote stays (the same on every rank).
  // Reading or writing the model's parameters outside forward (checkpoints, replica checks) goes through it.
  void with_whole_model(const std::function<void()>& use, bool keep_changes = false);
  // Bytes this rank holds of the parameters, their gradients between steps and the registered optimizer's state.
  [[nodiscard]] int64_t model_state_bytes();
  [[nodiscard]] torch::nn::Module& model();

 private:
  void log_warnings(const std::string& warnings);
  void load_scaler(const std::filesystem::path& dir);

  dist::Comm& comm_;
  AcceleratorOptions options_;
  at::Device device_{at::kCPU};
  PrecisionPolicy precision_;
  parallel::ScaleState scale_;  // this step's unscale_gradients()
  int threads_ = 1;
  torch::nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  std::unique_ptr<parallel::Strategy> strategy_;  // --zero-stage (parallel/strategy.hpp)
  std::vector<std::filesystem::path> tokenizer_files_;
  std::shared_ptr<const ModelFiles> model_files_;
  std::set<std::string> logged_warnings_;
  int64_t micro_batches_ = 0;  // accumulate() calls since the last sync
  int64_t local_steps_ = 0;    // Local SGD: local_sgd_step() calls since parameters were last averaged
  bool sync_ = true;
};

}  // namespace hpctrain::train
