// DDP-style gradient averaging: gradients are copied into fused per-bucket buffers as autograd hooks
// fire, each complete bucket is averaged over all ranks with one in-place allreduce (on a communication
// thread, overlapping the rest of backward), and finalize() makes each param.grad the average: a view of
// the bucket buffer for CPU parameters (Note [Gradients as bucket views]), a copy otherwise. With one rank and
// parameters off the CPU nothing is copied: hooks are not installed and .grad stays autograd's (Note [Device buckets]).
// Bucket layout and launch order: Note [Bucket order] in src/ddp/gradient_reducer.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/ddp/named_tensors.hpp"
#include "hpctrain/dist/buckets.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/dist/zero_slices.hpp"

namespace hpctrain::ddp {

struct ReducerOptions {
  int64_t first_bucket_bytes = dist::kDefaultFirstBucketBytes;  // cap of the first bucket, bytes
  int64_t bucket_bytes = dist::kDefaultBucketBytes;             // cap of every later bucket, bytes
  // Reduce buckets on a communication thread while backward still runs. Needs MPI_THREAD_MULTIPLE;
  // without it the reducer falls back to reducing everything in finalize() and says so once.
  bool overlap = true;
  // The dtype gradients travel in: f32, or bf16 (half the bytes; each rank rounds its float32 gradients to
  // bf16, the ranks sum them as bf16, the sums come back as float32 and are divided by world_size there;
  // Note [bf16 gradient reduction] in src/ddp/bucket_reduce.cpp). float64 parameters travel as float64
  // with f32.
  dist::DType wire_dtype = dist::DType::f32;
  // The buckets, in launch order: indices into named_parameters, each parameter once, one reduction dtype per
  // bucket. Empty: dist::assign_buckets by the sizes above (Note [Bucket order]). ZeRO-3 gives one bucket per
  // group of a unit's trainable parameters (Note [Sharded parameters] in src/ddp/sharded_parameters.cpp).
  std::vector<dist::Bucket> buckets;
  // Observes the copy-fence contract (Note [Fenced collectives] in src/ddp/gradient_reducer.cpp): called with a
  // buffer right after the reducer fenced the device work queued on it — immediately before every collective
  // that reads it, and at the end of every reduction. For tests; empty in production.
  std::function<void(const at::Tensor& buffer)> on_fence;
};

// Communication of one synced step (last_step_stats) or summed over all synced steps (total_stats).
struct ReducerStats {
  int64_t steps = 0;             // synced steps finalized
  int64_t bytes_reduced = 0;     // bytes this rank passed to allreduce
  double allreduce_seconds = 0;  // wall time inside allreduce and the 1/world_size scaling
  double exposed_seconds = 0;    // wall time finalize() spent on communication after backward ended
};

class GradientReducer {
 public:
  // Collective (duplicates `comm`): every rank constructs its reducer at the same point, with the
  // same parameter names, shapes and dtypes (check with ddp::check_same_structure first).
  // named_parameters: leaf tensors that require grad, dense, float32/float64/float16/bfloat16, each
  // once. Half-precision gradients are reduced in float32.
  GradientReducer(dist::Comm& comm, NamedTensors named_parameters, ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(GradientReducer&&) noexcept;
  GradientReducer& operator=(GradientReducer&&) noexcept;

  // Call after every backward (and before the optimizer step). On a synced step: waits for every
  // bucket — completing the buckets of parameters that got no gradient here with their local .grad
  // or zeros — and sets each param.grad to the average over ranks. On CPU parameters that .grad is a
  // view of the reducer's buffer, valid until the next synced backward overwrites it (like DDP's
  // gradient_as_bucket_view). Collective on synced steps.
  // Returns warnings for the caller to log (empty when none): the names of parameters that got no
  // gradient (each reported once), and a fallback from overlap. A no-op when sync is off.
  [[nodiscard]] std::string finalize();

  // Collective. Local SGD (Note [Local SGD] in src/ddp/gradient_reducer.cpp): replaces every parameter by
  // its average over the ranks, through the gradient buckets' buffers (one allreduce per bucket, the
  // same buckets and order on every rank). Call between steps (sync off, or after finalize()). A .grad
  // that is a view of a bucket (Note [Gradients as bucket views]) is copied out first and keeps its values.
  void average_parameters();

  // ---- ZeRO (Note [ZeRO slices] in src/dist/zero_slices.cpp, Note [ZeRO gradient reduction]) ----
  // Switches to sharded reduction: buckets are laid out again (parameter i starts at a multiple of
  // alignments[i] elements, registration order) and reduce-scattered; after a synced finalize() .grad is
  // undefined and this rank's averaged slices are gradient_slices(). Stage 2 also frees each bucket's buffer
  // once it is reduced. Call before the first backward, with world_size > 1. Not collective.
  void enable_zero(int stage, const std::vector<int64_t>& alignments);
  [[nodiscard]] int zero_stage() const;
  // The registered parameters, in registration order.
  [[nodiscard]] std::vector<at::Tensor> parameters() const;
  // With ZeRO: this rank's segment of parameter i (registration order) and the bucket holding it.
  struct Shard {
    std::size_t bucket = 0;
    dist::ZeroSegment segment;
  };
  [[nodiscard]] const std::vector<Shard>& shards() const;
  // With ZeRO, after a synced finalize(): this rank's averaged slice of every bucket (1-D; padding is 0).
  // Valid until the next synced backward.
  [[nodiscard]] std::vector<at::Tensor> gradient_slices() const;
  // Collective, with ZeRO, between steps: every rank's slices of bucket `bucket`'s parameters (updated by it)
  // reach every rank (one all-gather through the bucket's buffer). With overlap it runs on the communication
  // thread and returns at once (the caller may update the next bucket's parameters meanwhile, not this
  // one's); wait_parameter_allgathers() waits. Every rank starts every bucket once per step, in the same order.
  void start_parameter_allgather(std::size_t bucket);
  void wait_parameter_allgathers();
  // start_parameter_allgather for every bucket, then the wait.
  void allgather_parameters();

  // Gradient accumulation: with sync off, hooks do nothing and .grad accumulates locally; the next
  // synced backward reduces the accumulated sum. Change it only between finalize() and the next backward.
  void set_sync(bool sync);
  bool sync() const;

  // Whether buckets are reduced during backward (false when requested but MPI cannot).
  bool overlap() const;
  const std::vector<dist::Bucket>& buckets() const;
  // Parameters that got no gradient on this rank in the last synced step.
  const std::vector<std::string>& unused_parameters() const;
  const ReducerStats& last_step_stats() const;
  const ReducerStats& total_stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns sync off for its lifetime (micro-batches of gradient accumulation), like DDP's no_sync().
class NoSyncScope {
 public:
  explicit NoSyncScope(GradientReducer& reducer) : reducer_(reducer), previous_(reducer.sync()) {
    reducer_.set_sync(false);
  }
  ~NoSyncScope() { reducer_.set_sync(previous_); }
  NoSyncScope(const NoSyncScope&) = delete;
  NoSyncScope& operator=(const NoSyncScope&) = delete;

 private:
  GradientReducer& reducer_;
  bool previous_;
};

}  // namespace hpctrain::ddp
