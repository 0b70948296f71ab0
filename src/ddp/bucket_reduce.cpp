// One bucket's allreduce (reducer_impl.hpp): dense, by rows (Note [Row-sparse buckets]), or packed to bf16
// (Note [bf16 gradient reduction]); ZeRO's buckets go to reduce_scatter_mean (zero_reduce.hpp).
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <utility>

#include "reducer_impl.hpp"
#include "zero_reduce.hpp"
#include "hpctrain/core/span.hpp"

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
// Note [bf16 gradient reduction]
// With ReducerOptions::wire_dtype bf16 (--grad-reduce-dtype bf16) every allreduce of gradients — dense
// buckets, the rows of a row-sparse bucket, late gradients — packs its float32 (or float64) values into a
// bf16 copy (torch's .to(bfloat16): round to nearest, ties to even, inf stays inf), allreduce-sums that
// copy (Note [bf16 reduction] in include/hpctrain/dist/comm.hpp: identical bits on every rank), and unpacks
// it into the bucket, where the division by world_size happens in float32: dividing before packing would
// round twice, and 1/world_size is exact only for powers of two. The late-gradient flags ride along: sums
// of 0/1 flags are exact in bf16 up to 256 ranks and stay non-zero beyond. With one rank nothing travels,
// so nothing is packed. Local SGD's parameter averages (Note [Local SGD]) and the row marks stay exact.

namespace hpctrain::ddp {
namespace {

constexpr int64_t kRowSparseMinRows = 1024;

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

}  // namespace

Fence make_fence(std::function<void(const at::Tensor&)> observe) {
  return [observe = std::move(observe)](const at::Tensor& buffer) {
    wait_for_queued_work(buffer.device());
    if (observe) observe(buffer);
  };
}

bool reduce_by_rows(const at::Tensor& param, const at::Device& bucket_device) {
  return bucket_device.is_cpu() && param.dim() == 2 && param.size(0) >= kRowSparseMinRows &&
         param.size(0) >= 8 * param.size(1);
}

void allreduce_sum(dist::Comm& comm, const at::Tensor& values, const Fence& fence) {
  fence(values);
  comm.allreduce(values.data_ptr(), static_cast<std::size_t>(values.numel()), to_dist(values.scalar_type()),
                 dist::ReduceOp::sum);
}

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

at::Tensor& ensure_values(FlatBuffer& buffer) {
  if (!buffer.values.defined()) buffer.values = at::zeros({buffer.total}, buffer.options);
  return buffer.values;
}

}  // namespace hpctrain::ddp
