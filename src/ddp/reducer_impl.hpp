// Private to src/ddp: the gradient reducer's state (GradientReducer::Impl) and the bucket buffers its
// collectives work on, shared by gradient_reducer.cpp (hooks, launch order, finalize, Local SGD),
// bucket_reduce.cpp (the allreduce of a bucket: dense, row-sparse, bf16 on the wire) and zero_reduce.cpp
// (ZeRO's reduce-scatter and parameter all-gather). The Notes are in those files.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bucket_place.hpp"
#include "comm_thread.hpp"
#include "copy_fence.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"

namespace hpctrain::ddp {

// The dtype a parameter's gradient is reduced in: half precision is summed in float32.
inline at::ScalarType reduction_dtype(at::ScalarType dtype) { return dtype == at::kDouble ? at::kDouble : at::kFloat; }

inline dist::DType to_dist(at::ScalarType dtype) { return dtype == at::kDouble ? dist::DType::f64 : dist::DType::f32; }

// Note [Fenced collectives]: waits for the device work queued on a buffer, then tells ReducerOptions::on_fence.
using Fence = std::function<void(const at::Tensor&)>;
[[nodiscard]] Fence make_fence(std::function<void(const at::Tensor&)> observe);

// A bucket's flat buffer, shared with the communication thread (which may outlive the reducer,
// see CommThread::~CommThread).
struct FlatBuffer {
  at::Tensor values;       // CPU, 1-D: gradients, then (last bucket, overlap) late-gradient flags
  dist::DType wire = dist::DType::f32;  // f32 (values' own dtype) or bf16 (Note [bf16 gradient reduction])
  at::Tensor packed;       // bf16 wire: the bf16 copy of values sent to allreduce (kept between steps)
  int64_t grad_numel = 0;  // elements that hold gradients; the rest are flags
  int64_t rows = 0;        // > 0: the gradients are one [rows, grad_numel / rows] matrix reduced by rows
  double seconds = 0;      // time of the last reduction (written by whoever reduced it)
  int64_t bytes = 0;       // bytes passed to allreduce by the last reduction
  // ZeRO (Note [ZeRO gradient reduction]): defined = reduce-scatter the first `padded` values into `slice`
  at::Tensor slice;
  int64_t padded = 0;
  bool release = false;       // stage 2: drop `values` once reduced (allocated again by the next step's first write)
  at::TensorOptions options;  // of `values`, to allocate it again
  int64_t total = 0;          // numel of `values` (gradients, padding, flags)
};

// Note [Row-sparse buckets]: whether a bucket holding only `param` is reduced by rows.
[[nodiscard]] bool reduce_by_rows(const at::Tensor& param, const at::Device& bucket_device);

// Sums `values` over the ranks in place (no division).
void allreduce_sum(dist::Comm& comm, const at::Tensor& values, const Fence& fence);
// Allreduce-sums `buffer` in place and divides its gradients by world_size (ZeRO: reduce-scatters into its
// slice); a span named after `what` ("allreduce", "late allreduce") numbered by `bucket`, on whichever thread
// reduces it. Ends with a fence: its device work is done when it returns (Note [Fenced collectives]).
void reduce_in_place(dist::Comm& comm, FlatBuffer& buffer, const char* what, std::size_t bucket, const Fence& fence);
// A bucket's buffer; under ZeRO stage 2 allocated again (zeros: the padding must stay 0) when it was released.
at::Tensor& ensure_values(FlatBuffer& buffer);

struct ParamSlot {
  std::string name;
  at::Tensor param;
  std::size_t bucket = 0;
  int64_t offset = 0;  // elements into the bucket's buffer
  unsigned hook = 0;
  int fired = 0;         // hook calls in this step
  at::Tensor late;       // gradient that arrived after the bucket was launched (see Note [Bucket order])
  bool reported = false;  // already named in an unused-parameter warning
};

struct BucketState {
  dist::Bucket params;  // indices into the reducer's parameters, in buffer order
  std::shared_ptr<FlatBuffer> buffer;
  std::shared_ptr<CopyFence> filled = std::make_shared<CopyFence>();  // its gradients' copies (Note [Device buckets])
  std::size_t pending = 0;  // parameters whose hook has not fired yet in this step
  bool launched = false;
  uint64_t ticket = 0;  // CommThread ticket of its reduction (overlap)
};

struct GradientReducer::Impl {
  Impl(dist::Comm& caller_comm, NamedTensors named_parameters, const ReducerOptions& options);
  ~Impl();

  void on_gradient(std::size_t index, const at::Tensor& grad);
  std::string finalize();

  void place_buckets();
  at::Tensor slot_view(const ParamSlot& slot) const;
  void start_slot(ParamSlot& slot, const at::Tensor& slot_values, const at::Tensor& grad);
  void launch_ready_buckets();
  void launch(std::size_t bucket_index);
  void complete_missing_parameters();
  void reduce_late_gradients();
  void write_averages_to_grads();
  void reset_step();
  std::string unused_warning();
  void average_parameters();
  void enable_zero(int stage, const std::vector<int64_t>& alignments);
  void start_parameter_allgather(std::size_t bucket);
  void wait_parameter_allgathers();
  at::Tensor& bucket_values(std::size_t bucket) const;
  void release_launched_grads(std::size_t firing);
  void reduce_zero_flags();

  std::shared_ptr<dist::Comm> comm;  // private duplicate; see Note [Bucket order]
  Fence fence;                       // Note [Fenced collectives]
  BucketPlace place = BucketPlace::host;
  bool overlap = false;
  at::Device device{at::kCPU};          // the parameters' device
  at::TensorOptions bucket_place;       // where buckets live (Note [Device buckets])
  CopyFence copied_back;                // the last step's averages copied into device .grads
  std::vector<ParamSlot> params;
  std::vector<BucketState> buckets;
  std::vector<dist::Bucket> assignment;
  std::size_t late_flags = 0;     // flags after the last bucket's gradients
  std::size_t next_launch = 0;    // first bucket not launched in this step
  bool sync = true;
  bool step_active = false;       // a hook fired since the last finalize()
  std::vector<std::size_t> unused_indices;  // parameters without a gradient in the last synced step
  std::vector<std::string> unused_last_step;
  std::string pending_warnings;
  ReducerStats last_step, total;
  int zero_stage = 0;                    // Note [ZeRO gradient reduction]
  std::vector<GradientReducer::Shard> shards;  // ZeRO: this rank's segment of each parameter
  std::vector<std::size_t> grads_to_release;   // stage 2: parameters of launched buckets whose .grad can go
  uint64_t allgather_ticket = 0;               // the last parameter all-gather queued on the communication thread
  mutable std::mutex mutex;       // hooks may run on autograd's device threads
  std::unique_ptr<CommThread> comm_thread;  // last: destroyed (joined) first
};

}  // namespace hpctrain::ddp
