#include "hpctrain/ddp/gradient_reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "bucket_place.hpp"
#include "comm_thread.hpp"
#include "copy_fence.hpp"
#include "zero_reduce.hpp"
#include "hpctrain/compat/current_device.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"

// Note [Bucket order]
// MPI matches collectives on a communicator by call order, so every rank must allreduce the same
// buckets in the same order. The buckets are a pure function of the parameter sizes
// (dist::assign_buckets, identical on every rank), and they are launched strictly in bucket order:
// a bucket complete before its predecessor waits for it. Which hooks fire, and when, may differ
// between ranks (unused parameters, data-dependent control flow); the launch order never does,
// because finalize() completes every bucket not launched yet — missing gradients become the local
// .grad or zeros — and launches them in order.
// Bucket collectives run on a private duplicate of the caller's communicator, on one thread
// (CommThread), so collectives the caller issues on its own communicator never interleave with them.
// Late gradients: a hook may fire again after its bucket was launched (a parameter shared across a
// reentrant checkpoint, or two backward calls in one step). Such gradients are kept aside; the last
// bucket, which only finalize() launches, carries one flag per earlier bucket ("this rank has a late
// gradient for it") after its gradients. Every rank reads the same summed flags, so all of them
// reduce the flagged buckets' late gradients once more, in order: late gradients cost a collective
// only when they happen, and never desynchronize the ranks.
//
// Note [Row-sparse buckets]
// An embedding gradient ([vocab, dim]) is non-zero only in the rows of the tokens in the batch, and it is
// the last gradient backward produces, so its whole reduction is exposed after backward (31 MB, 70 % of
// all gradient bytes, for the DistilBERT benchmark model). A bucket holding a single 2-D parameter with
// at least kRowSparseMinRows rows and 8x more rows than columns is reduced by rows: every rank marks
// its non-zero rows in a byte per row, a max-allreduce of those marks gives the union (identical on
// every rank), and only the union's rows (plus any trailing late-gradient flags) are summed. Rows
// outside the union are zero on every rank, so the result equals the dense reduction's. When the union
// holds more than half the rows, the dense reduction runs instead (every rank decides alike).
//
// Note [Gradients as bucket views]
// After finalize(), the .grad of a CPU parameter reduced in its own dtype is a view of its slice of the
// bucket buffer (DDP's gradient_as_bucket_view): the averages are not copied back, and the optimizer
// reads them in place. Other parameters (device tensors, half precision) get the average copied into
// their .grad. The buffer must never change while the communication thread reduces it, yet autograd's
// AccumulateGrad adds into an existing .grad in place, after the tensor hooks run. So the hook that
// copies a gradient into its slot (start_slot) first folds whatever .grad holds into the slot — nothing
// to copy when .grad already is the slot — and then sets .grad to undefined: AccumulateGrad then just
// takes the new gradient as .grad, and finalize() replaces it with the view. Between steps the views
// behave as ordinary gradients: zero_grad() (to none or zero_()), no-sync micro-batches accumulating
// into them, and clipping all work. As with DDP, a reference to a .grad kept across a synced backward
// sees the next step's values.
//
// Note [Local SGD]
// With local SGD (Accelerate's LocalSGD, train/accelerator.hpp) ranks step on their own gradients and
// every K steps average the parameters instead. Those averages reuse the reducer's bucket buffers, which
// are idle then (no synced backward): a bucket's parameters are copied into its buffer in slot order,
// the buffer's gradient part is allreduce-summed and divided by world_size in place, and the slots are
// copied back, in bucket order on every rank (Note [Bucket order]). Always dense: parameters, unlike
// embedding gradients, have no zero rows. The buckets hold the reduction dtype (float32 for half
// parameters), so half-precision parameters are averaged in float32.
//
// Note [bf16 gradient reduction]
// With ReducerOptions::wire_dtype bf16 (--grad-reduce-dtype bf16) every allreduce of gradients — dense
// buckets, the rows of a row-sparse bucket, late gradients — packs its float32 (or float64) values into a
// bf16 copy (torch's .to(bfloat16): round to nearest, ties to even, inf stays inf), allreduce-sums that
// copy (Note [bf16 reduction] in include/hpctrain/dist/comm.hpp: identical bits on every rank), and unpacks
// it into the bucket, where the division by world_size happens in float32: dividing before packing would
// round twice, and 1/world_size is exact only for powers of two. The late-gradient flags ride along: sums
// of 0/1 flags are exact in bf16 up to 256 ranks and stay non-zero beyond. With one rank nothing travels,
// so nothing is packed. Local SGD's parameter averages (Note [Local SGD]) and the row marks stay exact.

// Note [Device buckets]
// Buckets live where the communicator can reduce them (Comm::accepts, Note [Device buffers]): on the CPU for
// CPU parameters; on the parameters' GPU when MPI is CUDA-aware; otherwise in pinned host memory, so that
// the copies between device and bucket are asynchronous. A hook queues its gradient's copy into the bucket
// on the current stream (autograd's, which produced the gradient), non-blocking. When a bucket is complete,
// its CopyFence is recorded on that stream, and the communication thread waits for that fence — that bucket's
// copies, nothing else — before MPI touches the bucket. The averages go back to .grad non-blocking on the
// same stream (or stay as bucket views when the bucket is on the parameter's device), and the next step's
// first host write into a pinned bucket waits for the copy-back fence. No device-wide synchronize().
// Placement is plan_bucket_place (bucket_place.hpp). With one rank and parameters off the CPU there is nothing to
// average: no buckets, no hooks, no copies (BucketPlace::none). The communication thread makes the parameters'
// device current before its first job (Note [Current device] in include/hpctrain/train/device.hpp).
// Not done: staging copies on a side stream ordered by events (docs/gpu.md); they run on autograd's stream.
//
// Note [Fenced collectives]
// A CUDA-aware MPI reads device memory with its own copies, unordered with the streams our kernels run on. So
// every collective is preceded by a fence on the buffer it reads: the calling thread waits for the work queued on
// its current stream (wait_for_queued_work) — the bf16 packing copy, the late-gradient buffers' copies and
// additions, local SGD's parameter copies — and every reduction ends with one after its division by world_size,
// so a job the communication thread has finished has finished on the device too (the copy-back may then run on
// any stream). Copies made by hooks on autograd's stream are fenced by each bucket's CopyFence (Note [Device
// buckets]). On the CPU the fence costs nothing. The fence is one function (Fence below) through which every
// collective of this file goes; ReducerOptions::on_fence observes it, and tests/cuda_logic checks with a fake
// two-rank communicator that every collective is immediately preceded by a fence on its own buffer.

namespace hpctrain::ddp {
namespace {

// The dtype a parameter's gradient is reduced in: half precision is summed in float32.
at::ScalarType reduction_dtype(at::ScalarType dtype) { return dtype == at::kDouble ? at::kDouble : at::kFloat; }

dist::DType to_dist(at::ScalarType dtype) { return dtype == at::kDouble ? dist::DType::f64 : dist::DType::f32; }

constexpr int64_t kRowSparseMinRows = 1024;

// Note [Fenced collectives]: waits for the device work queued on a buffer, then tells ReducerOptions::on_fence.
using Fence = std::function<void(const at::Tensor&)>;

Fence make_fence(std::function<void(const at::Tensor&)> observe) {
  return [observe = std::move(observe)](const at::Tensor& buffer) {
    wait_for_queued_work(buffer.device());
    if (observe) observe(buffer);
  };
}

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

// Whether two tensors are the same elements of the same memory (a .grad that already is its bucket slice).
bool aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.is_alias_of(b) && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.scalar_type() == b.scalar_type();
}

void allreduce_sum(dist::Comm& comm, const at::Tensor& values, const Fence& fence) {
  fence(values);
  comm.allreduce(values.data_ptr(), static_cast<std::size_t>(values.numel()), to_dist(values.scalar_type()),
                 dist::ReduceOp::sum);
}

// Sums contiguous `values` over the ranks, sent as `wire`; returns the bytes passed to allreduce.
// `scratch` keeps the bf16 copy between calls. Note [bf16 gradient reduction].
int64_t allreduce_sum_as(dist::Comm& comm, const at::Tensor& values, dist::DType wire, at::Tensor& scratch,
                         const Fence& fence) {
  if (wire != dist::DType::bf16) {
    allreduce_sum(comm, values, fence);
    return values.nbytes();
  }
  const int64_t count = values.numel();
  if (comm.world_size() == 1) return count * 2;
  if (!scratch.defined() || scratch.numel() < count) scratch = at::empty({count}, values.options().dtype(at::kBFloat16));
  at::Tensor packed = scratch.narrow(0, 0, count);
  packed.copy_(values);
  fence(packed);
  comm.allreduce(packed.data_ptr(), static_cast<std::size_t>(count), dist::DType::bf16, dist::ReduceOp::sum);
  values.copy_(packed);
  return count * 2;
}

// One byte per row of a contiguous [rows, width] matrix: 1 where the row holds a non-zero (NaN counts as
// non-zero, -0 as zero, as in grads.ne(0).any(1)), else 0. A row is read only up to the block holding its
// first non-zero; untouched rows are read whole, in blocks the compiler vectorizes. On the DistilBERT
// benchmark's 30522 x 256 embedding gradient ne(0).any(1), which materializes a boolean matrix first,
// took 16 ms of the step on one thread; with this loop the whole row-sparse reduction takes under 3 ms.
template <typename T>
void mark_nonzero_rows(const T* values, int64_t rows, int64_t width, uint8_t* marks) {
  constexpr int64_t kBlock = 64;
  at::parallel_for(0, rows, 256, [&](int64_t first, int64_t last) {
    for (int64_t row = first; row < last; ++row) {
      const T* x = values + row * width;
      uint8_t any = 0;
      for (int64_t start = 0; start < width && !any; start += kBlock) {
        const int64_t stop = std::min(width, start + kBlock);
        for (int64_t j = start; j < stop; ++j) any |= static_cast<uint8_t>(x[j] != T(0));
      }
      marks[row] = any;
    }
  });
}

at::Tensor nonzero_rows(const at::Tensor& matrix) {
  at::Tensor marks = at::empty({matrix.size(0)}, matrix.options().dtype(at::kByte));
  AT_DISPATCH_FLOATING_TYPES(matrix.scalar_type(), "hpctrain_nonzero_rows", [&] {
    mark_nonzero_rows(matrix.data_ptr<scalar_t>(), matrix.size(0), matrix.size(1), marks.data_ptr<uint8_t>());
  });
  return marks;
}

// Note [Row-sparse buckets]: false (nothing done) when the dense reduction is the cheaper one.
bool reduce_rows(dist::Comm& comm, FlatBuffer& buffer, const Fence& fence) {
  const int64_t width = buffer.grad_numel / buffer.rows;
  const at::Tensor grads = buffer.values.narrow(0, 0, buffer.grad_numel).view({buffer.rows, width});
  at::Tensor marks = nonzero_rows(grads);
  fence(marks);
  comm.allreduce(marks.data_ptr(), static_cast<std::size_t>(marks.numel()), dist::DType::u8, dist::ReduceOp::max);
  buffer.bytes = marks.numel();
  const at::Tensor rows = marks.nonzero().view(-1);
  const int64_t selected = rows.numel();
  if (selected * 2 > buffer.rows) return false;
  const int64_t flags = buffer.values.numel() - buffer.grad_numel;
  at::Tensor packed = at::empty({selected * width + flags}, buffer.values.options());
  at::Tensor packed_rows = packed.narrow(0, 0, selected * width).view({selected, width});
  at::index_select_out(packed_rows, grads, 0, rows);
  packed.narrow(0, selected * width, flags).copy_(buffer.values.narrow(0, buffer.grad_numel, flags));
  buffer.bytes += allreduce_sum_as(comm, packed, buffer.wire, buffer.packed, fence);
  if (comm.world_size() > 1) packed_rows.div_(comm.world_size());
  grads.index_copy_(0, rows, packed_rows);
  buffer.values.narrow(0, buffer.grad_numel, flags).copy_(packed.narrow(0, selected * width, flags));
  return true;
}

// Allreduce-sums `buffer` in place and divides its gradients by world_size; a span named after `what`
// ("allreduce", "late allreduce") numbered by `bucket`, on whichever thread reduces it.
// Ends with a fence: its device work is done when it returns (Note [Fenced collectives]).
void reduce_in_place(dist::Comm& comm, FlatBuffer& buffer, const char* what, std::size_t bucket, const Fence& fence) {
  span::Span reduction(what, "communication", static_cast<int64_t>(bucket));
  buffer.bytes = 0;
  if (buffer.slice.defined()) {  // Note [ZeRO gradient reduction]
    buffer.bytes = reduce_scatter_mean(comm, buffer.values.narrow(0, 0, buffer.padded), buffer.slice, buffer.wire,
                                       buffer.packed, fence);
  } else if (buffer.rows == 0 || !reduce_rows(comm, buffer, fence)) {
    buffer.bytes += allreduce_sum_as(comm, buffer.values, buffer.wire, buffer.packed, fence);
    if (comm.world_size() > 1) buffer.values.narrow(0, 0, buffer.grad_numel).div_(comm.world_size());
  }
  fence(buffer.values);
  if (buffer.release && buffer.values.numel() == buffer.padded) buffer.values = at::Tensor();  // stage 2, no flags
  buffer.seconds = reduction.stop();
}

// A bucket's buffer; under ZeRO stage 2 allocated again (zeros: the padding must stay 0) when it was released.
at::Tensor& ensure_values(FlatBuffer& buffer) {
  if (!buffer.values.defined()) buffer.values = at::zeros({buffer.total}, buffer.options);
  return buffer.values;
}

// One parameter of a bucket as the parameter all-gather sees it (a job owns copies: Note [Bucket order]).
struct GatheredParameter {
  at::Tensor param;
  int64_t offset = 0;       // in the bucket's buffer
  dist::ZeroSegment own;    // this rank's segment
};

// Note [ZeRO gradient reduction]: this rank's updated segments into the bucket's buffer, the all-gather, every
// parameter back from the buffer; stage 2 drops the buffer again.
void allgather_bucket(dist::Comm& comm, FlatBuffer& buffer, const std::vector<GatheredParameter>& params,
                      std::size_t bucket, const Fence& fence) {
  span::Span gather("parameter allgather", "communication", static_cast<int64_t>(bucket));
  at::NoGradGuard no_grad;
  const at::Tensor values = ensure_values(buffer);
  for (const GatheredParameter& p : params) {
    if (p.own.numel() == 0) continue;
    values.narrow(0, p.offset + p.own.begin, p.own.numel())
        .copy_(p.param.detach().reshape(-1).narrow(0, p.own.begin, p.own.numel()));
  }
  allgather_slices(comm, values.narrow(0, 0, buffer.padded), fence);
  for (const GatheredParameter& p : params)
    p.param.detach().copy_(values.narrow(0, p.offset, p.param.numel()).view(p.param.sizes()));
  if (buffer.release) buffer.values = at::Tensor();
}

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

void validate_parameter(const std::string& name, const at::Tensor& param, std::unordered_set<const void*>& seen) {
  HPCTRAIN_CHECK(param.defined(), "GradientReducer: parameter '{}' is undefined", name);
  HPCTRAIN_CHECK(param.requires_grad() && param.is_leaf(),
                 "GradientReducer: parameter '{}' must be a leaf tensor that requires grad (pass only the "
                 "trainable parameters)", name);
  HPCTRAIN_CHECK(param.layout() == at::kStrided, "GradientReducer: parameter '{}' is sparse; only dense "
                 "parameters are supported", name);
  const at::ScalarType dtype = param.scalar_type();
  HPCTRAIN_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16,
                 "GradientReducer: parameter '{}' has dtype {}; expected float32, float64, float16 or bfloat16",
                 name, c10::toString(dtype));
  HPCTRAIN_CHECK(seen.insert(param.unsafeGetTensorImpl()).second,
                 "GradientReducer: parameter '{}' is registered twice; pass shared (tied) weights once", name);
}

}  // namespace

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

GradientReducer::Impl::Impl(dist::Comm& caller_comm, NamedTensors named_parameters, const ReducerOptions& options)
    : comm(caller_comm.duplicate()), fence(make_fence(options.on_fence)) {
  HPCTRAIN_CHECK(options.wire_dtype == dist::DType::f32 || options.wire_dtype == dist::DType::bf16,
                 "GradientReducer: ReducerOptions::wire_dtype must be f32 or bf16 (Note [bf16 gradient reduction])");
  overlap = options.overlap && comm->thread_level() == dist::ThreadLevel::multiple;
  if (options.overlap && !overlap) {
    pending_warnings += "gradient reducer: MPI did not provide MPI_THREAD_MULTIPLE, so gradients are reduced "
                        "after backward instead of overlapping it (slower, same result)\n";
  }

  std::unordered_set<const void*> seen;
  std::vector<int64_t> sizes_bytes;
  std::vector<int> groups;
  for (auto& [name, param] : named_parameters) {
    validate_parameter(name, param, seen);
    const at::ScalarType dtype = reduction_dtype(param.scalar_type());
    sizes_bytes.push_back(param.numel() * static_cast<int64_t>(c10::elementSize(dtype)));
    groups.push_back(static_cast<int>(dtype));
    ParamSlot slot;
    slot.name = std::move(name);
    slot.param = std::move(param);
    params.push_back(std::move(slot));
  }
  assignment = dist::assign_buckets(sizes_bytes, groups, options.first_bucket_bytes, options.bucket_bytes);
  place_buckets();
  if (place == BucketPlace::none) return;  // one rank: .grad is already the average, nothing to copy

  late_flags = overlap && assignment.size() > 1 ? assignment.size() - 1 : 0;
  for (std::size_t b = 0; b < assignment.size(); ++b) {
    BucketState bucket;
    bucket.params = assignment[b];
    bucket.pending = bucket.params.size();
    bucket.buffer = std::make_shared<FlatBuffer>();
    int64_t numel = 0;
    for (std::size_t index : bucket.params) {
      params[index].bucket = b;
      params[index].offset = numel;
      numel += params[index].param.numel();
    }
    bucket.buffer->grad_numel = numel;
    bucket.buffer->wire = options.wire_dtype;
    const bool is_last = b + 1 == assignment.size();
    const at::ScalarType dtype = reduction_dtype(params[bucket.params.front()].param.scalar_type());
    bucket.buffer->options = bucket_place.dtype(dtype);
    bucket.buffer->total = numel + (is_last ? static_cast<int64_t>(late_flags) : 0);
    bucket.buffer->values = at::zeros({bucket.buffer->total}, bucket.buffer->options);
    const at::Tensor& only = params[bucket.params.front()].param;
    if (bucket_place.device().is_cpu() && bucket.params.size() == 1 && only.dim() == 2 && only.size(0) >= kRowSparseMinRows &&
        only.size(0) >= 8 * only.size(1)) {
      bucket.buffer->rows = only.size(0);  // Note [Row-sparse buckets]
    }
    buckets.push_back(std::move(bucket));
  }

  if (overlap) comm_thread = std::make_unique<CommThread>([device = device] { compat::make_device_current(device); });
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].hook = params[i].param.register_hook([this, i](const at::TensorBase& grad) {
      on_gradient(i, at::Tensor(grad));
    });
  }
}

GradientReducer::Impl::~Impl() {
  if (place == BucketPlace::none) return;  // no hooks were registered
  for (ParamSlot& slot : params) slot.param.remove_hook(slot.hook);
}

// Note [Device buckets]: one device per rank; buckets on it when MPI takes its memory, else pinned host memory.
void GradientReducer::Impl::place_buckets() {
  if (!params.empty()) device = params.front().param.device();
  for (const ParamSlot& slot : params)
    HPCTRAIN_CHECK(slot.param.device() == device, "GradientReducer: parameter '{}' is on {}, '{}' on {}; expected one "
                   "device per rank", slot.name, slot.param.device().str(), params.front().name, device.str());
  place = plan_bucket_place(device, *comm);
  bucket_place = at::TensorOptions().device(at::kCPU);
  if (place == BucketPlace::device) bucket_place = at::TensorOptions().device(device);
  if (place == BucketPlace::pinned_host) bucket_place = bucket_place.pinned_memory(true);
}

at::Tensor GradientReducer::Impl::slot_view(const ParamSlot& slot) const {
  return bucket_values(slot.bucket).narrow(0, slot.offset, slot.param.numel()).view(slot.param.sizes());
}

at::Tensor& GradientReducer::Impl::bucket_values(std::size_t bucket) const { return ensure_values(*buckets[bucket].buffer); }

// First gradient of a step: the slot starts from the local .grad (accumulated micro-batches, or a previous
// step's gradient nobody zeroed), else zeros. See Note [Gradients as bucket views].
void GradientReducer::Impl::start_slot(ParamSlot& slot, const at::Tensor& slot_values, const at::Tensor& grad) {
  const at::Tensor& accumulated = slot.param.grad();
  if (accumulated.defined()) {
    if (!aliases(accumulated, slot_values)) slot_values.copy_(accumulated);
    if (grad.defined()) slot_values.add_(grad.to(slot_values.device()));
  } else if (grad.defined()) {
    slot_values.copy_(grad, /*non_blocking=*/true);  // Note [Device buckets]
  } else {
    slot_values.zero_();
  }
  --buckets[slot.bucket].pending;
}

void GradientReducer::Impl::on_gradient(std::size_t index, const at::Tensor& grad) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!sync) return;
  at::NoGradGuard no_grad;
  ParamSlot& slot = params[index];
  HPCTRAIN_CHECK(!grad.defined() || grad.layout() == at::kStrided,
                 "GradientReducer: parameter '{}' received a sparse gradient; only dense gradients are supported",
                 slot.name);
  if (!step_active) copied_back.wait();  // the first write into the buckets this step
  step_active = true;
  if (zero_stage == 2) release_launched_grads(index);
  if (buckets[slot.bucket].launched) {  // see "Late gradients" in Note [Bucket order]
    if (grad.defined()) {
      const at::Tensor moved = grad.to(bucket_place.device(), reduction_dtype(grad.scalar_type()));
      slot.late = slot.late.defined() ? slot.late + moved : moved.clone();
    }
    ++slot.fired;
    return;
  }
  const at::Tensor slot_values = slot_view(slot);
  if (slot.fired == 0) {
    start_slot(slot, slot_values, grad);
  } else if (grad.defined()) {  // a second gradient in this step: accumulate
    slot_values.add_(grad.to(slot_values.device()));
  }
  // The slot holds everything .grad held: AccumulateGrad, which runs after this hook, then takes the new
  // gradient as .grad instead of adding it into the bucket while the bucket may be in flight.
  slot.param.mutable_grad() = at::Tensor();
  ++slot.fired;
  if (overlap) launch_ready_buckets();
}

// Launches complete buckets in bucket order; the last one is left to finalize() (it carries the flags).
void GradientReducer::Impl::launch_ready_buckets() {
  while (next_launch + 1 < buckets.size() && buckets[next_launch].pending == 0) launch(next_launch++);
}

void GradientReducer::Impl::launch(std::size_t bucket_index) {
  BucketState& bucket = buckets[bucket_index];
  bucket.launched = true;
  bucket.filled->record(device);  // after every copy into the bucket (Note [Device buckets])
  if (zero_stage == 2) grads_to_release.insert(grads_to_release.end(), bucket.params.begin(), bucket.params.end());
  if (!overlap) {
    bucket.filled->wait();
    reduce_in_place(*comm, *bucket.buffer, "allreduce", bucket_index, fence);
    return;
  }
  bucket.ticket = comm_thread->submit([shared_comm = comm, buffer = bucket.buffer, filled = bucket.filled, bucket_index,
                                       job_fence = fence] {
    filled->wait();
    reduce_in_place(*shared_comm, *buffer, "allreduce", bucket_index, job_fence);
  });
}

// Parameters without a gradient this step enter their bucket as their local .grad or zeros, so every
// bucket completes on every rank.
void GradientReducer::Impl::complete_missing_parameters() {
  unused_indices.clear();
  for (std::size_t b = next_launch; b < buckets.size(); ++b) {
    for (std::size_t index : buckets[b].params) {
      ParamSlot& slot = params[index];
      if (slot.fired > 0) continue;
      start_slot(slot, slot_view(slot), at::Tensor());
      unused_indices.push_back(index);
    }
  }
  std::sort(unused_indices.begin(), unused_indices.end());
  unused_last_step.clear();
  for (std::size_t index : unused_indices) unused_last_step.push_back(params[index].name);
}

// Runs after every bucket was reduced; see "Late gradients" in Note [Bucket order].
void GradientReducer::Impl::reduce_late_gradients() {
  if (late_flags == 0) return;
  const FlatBuffer& last = *buckets.back().buffer;
  const at::Tensor flags = last.values.narrow(0, last.grad_numel, static_cast<int64_t>(late_flags)).to(at::kCPU, at::kDouble);
  const double* flag = flags.data_ptr<double>();
  for (std::size_t b = 0; b < late_flags; ++b) {
    if (flag[b] == 0) continue;
    FlatBuffer late;
    const FlatBuffer& reduced = *buckets[b].buffer;
    late.values = at::zeros({reduced.grad_numel}, reduced.options);
    late.grad_numel = reduced.grad_numel;
    late.wire = reduced.wire;
    late.padded = reduced.padded;
    if (reduced.slice.defined()) late.slice = at::zeros_like(reduced.slice);
    for (std::size_t index : buckets[b].params) {
      const ParamSlot& slot = params[index];
      if (slot.late.defined()) late.values.narrow(0, slot.offset, slot.param.numel()).copy_(slot.late.reshape(-1));
    }
    reduce_in_place(*comm, late, "late allreduce", b, fence);
    if (late.slice.defined())
      buckets[b].buffer->slice.add_(late.slice);
    else
      buckets[b].buffer->values.add_(late.values);
    last_step.bytes_reduced += late.bytes;
    last_step.allreduce_seconds += late.seconds;
  }
}

// Note [Gradients as bucket views]: a CPU parameter reduced in its own dtype gets its bucket slice as .grad.
void GradientReducer::Impl::write_averages_to_grads() {
  for (ParamSlot& slot : params) {
    at::Tensor& grad = slot.param.mutable_grad();
    at::Tensor average = slot_view(slot);
    if (slot.param.device() == average.device() && slot.param.scalar_type() == average.scalar_type()) {
      grad = std::move(average);
      continue;
    }
    if (!grad.defined()) grad = at::empty_like(slot.param, at::MemoryFormat::Contiguous);
    grad.copy_(average, /*non_blocking=*/true);  // Note [Device buckets]
  }
  copied_back.record(device);
}

void GradientReducer::Impl::reset_step() {
  for (ParamSlot& slot : params) {
    slot.fired = 0;
    slot.late = at::Tensor();
  }
  for (BucketState& bucket : buckets) {
    bucket.pending = bucket.params.size();
    bucket.launched = false;
  }
  next_launch = 0;
  step_active = false;
}

std::string GradientReducer::Impl::unused_warning() {
  std::string names;
  std::size_t count = 0;
  for (std::size_t index : unused_indices) {
    ParamSlot& slot = params[index];
    if (slot.reported) continue;
    slot.reported = true;
    names += (count++ ? ", " : "") + slot.name;
  }
  if (count == 0) return "";
  return fmt::format("gradient reducer: {} parameter(s) got no gradient on rank {} in this step and were averaged "
                     "as their local .grad or zeros: {} (reported once per parameter; a parameter no rank ever "
                     "uses still costs communication)\n", count, comm->rank(), names);
}

std::string GradientReducer::Impl::finalize() {
  std::lock_guard<std::mutex> lock(mutex);
  std::string warnings = std::move(pending_warnings);
  pending_warnings.clear();
  if (!sync || place == BucketPlace::none) return warnings;
  at::NoGradGuard no_grad;
  span::Span exposed("gradient sync", "communication");  // what backward did not hide
  last_step = ReducerStats{};
  last_step.steps = 1;

  copied_back.wait();  // no hook fired: complete_missing_parameters writes first (Note [Device buckets])
  complete_missing_parameters();
  if (late_flags > 0) {
    const FlatBuffer& last = *buckets.back().buffer;
    at::Tensor flags = last.values.narrow(0, last.grad_numel, static_cast<int64_t>(late_flags));
    for (std::size_t b = 0; b < late_flags; ++b) {
      bool has_late = false;
      for (std::size_t index : buckets[b].params) has_late = has_late || params[index].late.defined();
      flags[static_cast<int64_t>(b)].fill_(has_late ? 1 : 0);
    }
  }
  // The buckets backward did not launch are reduced here, on the caller's thread, after the
  // communication thread has finished the launched ones: the caller would only wait for them, and
  // handing them over costs two thread wake-ups per step (on one rank of the CNN benchmark, finalize()
  // took 0.2 ms with the hand-over, 0.04 ms without). Note [Bucket order] still holds: one thread at a
  // time, in bucket order.
  if (overlap && next_launch > 0) comm_thread->wait(buckets[next_launch - 1].ticket);
  for (; next_launch < buckets.size(); ++next_launch) {
    BucketState& bucket = buckets[next_launch];
    bucket.launched = true;
    bucket.filled->record(device);  // Note [Device buckets]
    bucket.filled->wait();
    reduce_in_place(*comm, *bucket.buffer, "allreduce", next_launch, fence);
  }
  for (const BucketState& bucket : buckets) {
    last_step.bytes_reduced += bucket.buffer->bytes;
    last_step.allreduce_seconds += bucket.buffer->seconds;
  }
  if (zero_stage > 0) reduce_zero_flags();
  reduce_late_gradients();
  last_step.exposed_seconds = exposed.stop();

  if (zero_stage > 0) {  // the averages are in the slices; every .grad (autograd's last gradient) goes
    for (ParamSlot& slot : params) slot.param.mutable_grad() = at::Tensor();
    grads_to_release.clear();
    if (zero_stage == 2)
      for (BucketState& bucket : buckets) bucket.buffer->values = at::Tensor();
  } else {
    write_averages_to_grads();
  }
  warnings += unused_warning();
  reset_step();
  total.steps += 1;
  total.bytes_reduced += last_step.bytes_reduced;
  total.allreduce_seconds += last_step.allreduce_seconds;
  total.exposed_seconds += last_step.exposed_seconds;
  return warnings;
}

// Note [Local SGD]
void GradientReducer::Impl::average_parameters() {
  std::lock_guard<std::mutex> lock(mutex);
  HPCTRAIN_CHECK(zero_stage == 0, "GradientReducer::average_parameters (Local SGD) with ZeRO stage {}: not supported",
                 zero_stage);
  HPCTRAIN_CHECK(!step_active, "GradientReducer::average_parameters: called between a synced backward and its "
                 "finalize(); call it between optimizer steps");
  at::NoGradGuard no_grad;
  copied_back.wait();  // Note [Device buckets]: the last synced step's copy-back has left the buckets
  for (const BucketState& bucket : buckets) {
    for (std::size_t index : bucket.params) {
      ParamSlot& slot = params[index];
      const at::Tensor values = slot_view(slot);
      at::Tensor& grad = slot.param.mutable_grad();
      if (grad.defined() && aliases(grad, values)) grad = grad.clone();
      values.copy_(slot.param);
    }
    const at::Tensor sums = bucket.buffer->values.narrow(0, 0, bucket.buffer->grad_numel);
    allreduce_sum(*comm, sums, fence);  // a bucket on the device: MPI reads it only after the copies into it
    if (comm->world_size() > 1) sums.div_(comm->world_size());
    fence(sums);
    for (std::size_t index : bucket.params) params[index].param.copy_(slot_view(params[index]));
  }
}

// Note [ZeRO gradient reduction]
// With ZeRO (enable_zero; layout: Note [ZeRO slices] in src/dist/zero_slices.cpp) each bucket is
// reduce-scattered instead of allreduced, on the same communication thread, in the same order, overlapping
// backward as before (Note [Bucket order]); with --grad-reduce-dtype bf16 it is packed and summed with the
// same bf16 operation, so each slice has the bits stage 0's allreduce gives those elements. Row-sparse
// reduction is off (a dense reduce-scatter). The late-gradient flags get an allreduce of their own after
// the last bucket (they cannot ride in a bucket every rank receives only a slice of). After finalize() the
// averages exist only as this rank's slices (gradient_slices(), one per bucket, 1/world_size of it): .grad
// is left undefined. What the buckets hold during backward:
//   stage 1: every bucket buffer is allocated once and kept (full size, as stage 0's), and between steps it
//            carries the all-gathered parameter values;
//   stage 2: a bucket's buffer exists from the first gradient copied into it in a step until its
//            reduce-scatter ends (the communication thread drops it; finalize() drops the last ones), so at
//            any time only the buckets being filled or in flight hold memory; the parameter all-gathers
//            borrow one bucket at a time.
// The parameter all-gather (start_parameter_allgather) is one job per bucket on the same communication
// thread, queued by ZeroOptimizer as soon as that bucket's segments are updated, so it overlaps the update
// of the next bucket; without overlap it runs on the caller's thread. Autograd's own per-parameter gradient (.grad after AccumulateGrad) is
//            dropped at the next hook once its bucket is launched (on one device the engine runs hooks and
//            AccumulateGrad in order), so full-size gradients do not pile up during backward either.
// Gradient accumulation is unchanged: micro-batches with sync off accumulate in .grad locally (full size),
// and the synced backward folds that into its bucket.
void GradientReducer::Impl::enable_zero(int stage, const std::vector<int64_t>& alignments) {
  std::lock_guard<std::mutex> lock(mutex);
  HPCTRAIN_CHECK(stage == 1 || stage == 2, "GradientReducer::enable_zero: stage {}: expected 1 or 2", stage);
  HPCTRAIN_CHECK(!step_active && zero_stage == 0, "GradientReducer::enable_zero: call once, before the first backward");
  HPCTRAIN_CHECK(place != BucketPlace::none && comm->world_size() > 1,
                 "GradientReducer::enable_zero: needs more than one rank (world_size {})", comm->world_size());
  HPCTRAIN_CHECK(alignments.size() == params.size(), "GradientReducer::enable_zero: {} alignments for {} parameters",
                 alignments.size(), params.size());
  zero_stage = stage;
  shards.assign(params.size(), GradientReducer::Shard{});
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::vector<int64_t> numels, aligns;
    for (std::size_t index : buckets[b].params) {
      numels.push_back(params[index].param.numel());
      aligns.push_back(alignments[index]);
    }
    const dist::ZeroBucketLayout layout = dist::zero_bucket_layout(numels, aligns, comm->world_size());
    const std::vector<dist::ZeroSegment> segments = dist::zero_segments(layout, numels, comm->rank());
    for (std::size_t i = 0; i < buckets[b].params.size(); ++i) {
      const std::size_t index = buckets[b].params[i];
      params[index].offset = layout.offsets[i];
      shards[index] = GradientReducer::Shard{b, segments[i]};
    }
    FlatBuffer& buffer = *buckets[b].buffer;
    buffer.rows = 0;  // dense: Note [ZeRO gradient reduction]
    buffer.grad_numel = buffer.padded = layout.padded_numel;
    buffer.total = layout.padded_numel + (b + 1 == buckets.size() ? static_cast<int64_t>(late_flags) : 0);
    buffer.slice = at::zeros({layout.slice_numel}, buffer.options);
    buffer.release = stage == 2;
    buffer.values = stage == 2 ? at::Tensor() : at::zeros({buffer.total}, buffer.options);
  }
}

// Stage 2: the .grad autograd left on parameters of launched buckets (their gradients are in the buckets).
void GradientReducer::Impl::release_launched_grads(std::size_t firing) {
  for (std::size_t index : grads_to_release)
    if (index != firing) params[index].param.mutable_grad() = at::Tensor();
  grads_to_release.clear();
}

// ZeRO: the late-gradient flags, which stage 0 sends inside the last bucket, summed on their own.
void GradientReducer::Impl::reduce_zero_flags() {
  if (late_flags == 0) return;
  const FlatBuffer& last = *buckets.back().buffer;
  const at::Tensor flags = last.values.narrow(0, last.padded, static_cast<int64_t>(late_flags));
  allreduce_sum(*comm, flags, fence);
  last_step.bytes_reduced += flags.nbytes();
}

void GradientReducer::Impl::start_parameter_allgather(std::size_t bucket) {
  std::lock_guard<std::mutex> lock(mutex);
  HPCTRAIN_CHECK(zero_stage > 0 && !step_active && bucket < buckets.size(),
                 "GradientReducer::start_parameter_allgather({}): needs ZeRO, a bucket below {}, between steps", bucket,
                 buckets.size());
  copied_back.wait();
  std::vector<GatheredParameter> gathered;
  for (std::size_t index : buckets[bucket].params)
    gathered.push_back(GatheredParameter{params[index].param, params[index].offset, shards[index].segment});
  if (!overlap) {
    allgather_bucket(*comm, *buckets[bucket].buffer, gathered, bucket, fence);
    return;
  }
  allgather_ticket = comm_thread->submit([shared_comm = comm, buffer = buckets[bucket].buffer,
                                          gathered = std::move(gathered), bucket, job_fence = fence] {
    allgather_bucket(*shared_comm, *buffer, gathered, bucket, job_fence);
  });
}

void GradientReducer::Impl::wait_parameter_allgathers() {
  if (overlap && allgather_ticket > 0) comm_thread->wait(allgather_ticket);
}

GradientReducer::GradientReducer(dist::Comm& comm, NamedTensors named_parameters, ReducerOptions options)
    : impl_(std::make_unique<Impl>(comm, std::move(named_parameters), options)) {}
GradientReducer::~GradientReducer() = default;
GradientReducer::GradientReducer(GradientReducer&&) noexcept = default;
GradientReducer& GradientReducer::operator=(GradientReducer&&) noexcept = default;

std::string GradientReducer::finalize() { return impl_->finalize(); }
void GradientReducer::average_parameters() { impl_->average_parameters(); }

void GradientReducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  HPCTRAIN_CHECK(!impl_->step_active || sync, "GradientReducer::set_sync(false) called between a synced backward "
                 "and its finalize(); change sync only before backward");
  impl_->sync = sync;
}

bool GradientReducer::sync() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->sync;
}

void GradientReducer::enable_zero(int stage, const std::vector<int64_t>& alignments) {
  impl_->enable_zero(stage, alignments);
}
int GradientReducer::zero_stage() const { return impl_->zero_stage; }
void GradientReducer::start_parameter_allgather(std::size_t bucket) { impl_->start_parameter_allgather(bucket); }
void GradientReducer::wait_parameter_allgathers() { impl_->wait_parameter_allgathers(); }

void GradientReducer::allgather_parameters() {
  for (std::size_t b = 0; b < impl_->buckets.size(); ++b) start_parameter_allgather(b);
  wait_parameter_allgathers();
}
const std::vector<GradientReducer::Shard>& GradientReducer::shards() const { return impl_->shards; }

std::vector<at::Tensor> GradientReducer::parameters() const {
  std::vector<at::Tensor> out;
  for (const ParamSlot& slot : impl_->params) out.push_back(slot.param);
  return out;
}

std::vector<at::Tensor> GradientReducer::gradient_slices() const {
  std::vector<at::Tensor> out;
  for (const BucketState& bucket : impl_->buckets) out.push_back(bucket.buffer->slice);
  return out;
}

bool GradientReducer::overlap() const { return impl_->overlap; }
const std::vector<dist::Bucket>& GradientReducer::buckets() const { return impl_->assignment; }
const std::vector<std::string>& GradientReducer::unused_parameters() const { return impl_->unused_last_step; }
const ReducerStats& GradientReducer::last_step_stats() const { return impl_->last_step; }
const ReducerStats& GradientReducer::total_stats() const { return impl_->total; }

}  // namespace hpctrain::ddp
