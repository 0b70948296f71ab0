// The gradient reducer (gradient_reducer.hpp): hooks, bucket launch order, late gradients, finalize, Local
// SGD. A bucket's allreduce is in bucket_reduce.cpp, ZeRO's reduce-scatter and all-gather in zero_reduce.cpp.
#include "hpctrain/ddp/gradient_reducer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <functional>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "reducer_impl.hpp"
#include "hpctrain/compat/current_device.hpp"
#include "hpctrain/core/error.hpp"

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

// Whether two tensors are the same elements of the same memory (a .grad that already is its bucket slice).
bool aliases(const at::Tensor& a, const at::Tensor& b) {
  return a.is_alias_of(b) && a.data_ptr() == b.data_ptr() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.scalar_type() == b.scalar_type();
}

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

// ReducerOptions::buckets: every parameter exactly once, one reduction dtype per bucket.
std::vector<dist::Bucket> checked_buckets(const std::vector<dist::Bucket>& buckets, const std::vector<int>& dtypes) {
  std::vector<int> seen(dtypes.size(), 0);
  for (const dist::Bucket& bucket : buckets) {
    HPCTRAIN_CHECK(!bucket.empty(), "GradientReducer: ReducerOptions::buckets holds an empty bucket");
    for (std::size_t index : bucket) {
      HPCTRAIN_CHECK(index < dtypes.size() && seen[index]++ == 0 && dtypes[index] == dtypes[bucket.front()],
                     "GradientReducer: ReducerOptions::buckets must hold each of the {} parameters once, one dtype per "
                     "bucket (index {})", dtypes.size(), index);
    }
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    HPCTRAIN_CHECK(seen[i] == 1, "GradientReducer: ReducerOptions::buckets leaves parameter {} out", i);
  return buckets;
}

}  // namespace

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
  assignment = options.buckets.empty()
                   ? dist::assign_buckets(sizes_bytes, groups, options.first_bucket_bytes, options.bucket_bytes)
                   : checked_buckets(options.buckets, groups);
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
    if (bucket.params.size() == 1 && reduce_by_rows(only, bucket_place.device()))
      bucket.buffer->rows = only.size(0);  // Note [Row-sparse buckets] in bucket_reduce.cpp
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
