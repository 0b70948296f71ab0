// ZeRO in the gradient reducer (Note [ZeRO gradient reduction]): the bucket layout of enable_zero, the
// reduce-scatter of a gradient bucket into this rank's slice, the late-gradient flags' own allreduce, and the
// all-gather of updated parameter slices (zero_reduce.hpp, reducer_impl.hpp).
#include "zero_reduce.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "reducer_impl.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"

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

namespace hpctrain::ddp {

int64_t reduce_scatter_mean(dist::Comm& comm, const at::Tensor& values, const at::Tensor& slice, dist::DType wire,
                            at::Tensor& scratch, const std::function<void(const at::Tensor&)>& fence) {
  const int world = comm.world_size();
  const int64_t count = slice.numel();
  HPCTRAIN_CHECK(values.numel() == count * world && values.is_contiguous() && slice.is_contiguous(),
                 "reduce_scatter_mean: {} values for slices of {} on {} ranks", values.numel(), count, world);
  const int64_t sent = wire == dist::DType::bf16 ? 2 : static_cast<int64_t>(values.element_size());
  if (wire == dist::DType::bf16) {
    if (!scratch.defined() || scratch.numel() < count * (world + 1))
      scratch = at::empty({count * (world + 1)}, values.options().dtype(at::kBFloat16));
    at::Tensor packed = scratch.narrow(0, 0, count * world);
    at::Tensor received = scratch.narrow(0, count * world, count);
    packed.copy_(values);
    fence(packed);
    comm.reduce_scatter(packed.data_ptr(), received.data_ptr(), static_cast<std::size_t>(count), dist::DType::bf16,
                        dist::ReduceOp::sum);
    slice.copy_(received);
  } else {
    fence(values);
    comm.reduce_scatter(values.data_ptr(), slice.data_ptr(), static_cast<std::size_t>(count),
                        values.scalar_type() == at::kDouble ? dist::DType::f64 : dist::DType::f32, dist::ReduceOp::sum);
  }
  if (world > 1) slice.div_(world);
  fence(slice);
  return count * world * sent / 2;  // as Comm::bytes_sent counts a reduce-scatter
}

void allgather_slices(dist::Comm& comm, const at::Tensor& values, const std::function<void(const at::Tensor&)>& fence) {
  HPCTRAIN_CHECK(values.is_contiguous() && values.numel() % comm.world_size() == 0,
                 "allgather_slices: {} values do not split into {} slices", values.numel(), comm.world_size());
  fence(values);
  comm.allgather_in_place(values.data_ptr(), values.nbytes() / static_cast<std::size_t>(comm.world_size()));
  fence(values);
}

namespace {

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

}  // namespace

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

}  // namespace hpctrain::ddp
