// Note [bf16 gradient reduction] on two ranks: for a few SGD steps, the gradients a bf16-wire reducer
// averages equal bit for bit a reference written here (each rank's gradient rounded to bf16, the pair
// summed and rounded once more, halved in float32), lie within bf16's rounding bound of the exact float32
// average, are not that average, and are identical on both ranks; the bytes sent are half of float32's.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <cstring>

#include "harness.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"

using hpctrain::ddp::GradientReducer;
using hpctrain::ddp::ReducerOptions;

namespace mpi_test {
namespace {

constexpr int64_t kTableRows = 2048, kTableWidth = 16;
constexpr double kUnitRoundoff = 1.0 / 256;  // bf16: 8 significant bits, round to nearest: u = 2^-8

using Params = std::vector<std::pair<std::string, at::Tensor>>;

// [table [kTableRows, kTableWidth] (a row-sparse bucket), head [kTableWidth, 3]], equal on every rank.
Params make_params() {
  at::manual_seed(23);
  return {{"table.weight", at::randn({kTableRows, kTableWidth}, at::kFloat).requires_grad_(true)},
          {"head.weight", at::randn({kTableWidth, 3}, at::kFloat).requires_grad_(true)}};
}

at::Tensor rows_of(int rank, int step) {
  return at::tensor(std::vector<int64_t>{3, 4, 50 + 7 * rank + step, 1000 + rank, 2040 - step}, at::kLong);
}

at::Tensor loss_of(const Params& params, const at::Tensor& rows) {
  return at::matmul(at::embedding(params[0].second, rows), params[1].second).cos().sum() * 0.37;
}

// Rank `rank`'s gradients at the current parameters, computed on detached copies.
std::vector<at::Tensor> local_gradients(const Params& params, int rank, int step) {
  Params copies;
  for (const auto& [name, t] : params) copies.emplace_back(name, t.detach().clone().requires_grad_(true));
  loss_of(copies, rows_of(rank, step)).backward();
  std::vector<at::Tensor> grads;
  for (const auto& [name, t] : copies) grads.push_back(t.grad());
  return grads;
}

// The reference rounding, written independently of the code under test: the nearer of the two bf16
// neighbours by exact double distance, ties to the even one; NaN -> 0x7FC0.
uint16_t reference_bf16(double value) {
  if (std::isnan(value)) return 0x7FC0;
  const float narrowed = static_cast<float>(value);  // exact for the sums of two bf16 values tested here
  uint32_t bits;
  std::memcpy(&bits, &narrowed, 4);
  const uint32_t down = bits & 0xFFFF0000u, up = down + 0x10000u;
  auto as_double = [](uint32_t b) { float f; std::memcpy(&f, &b, 4); return static_cast<double>(f); };
  if ((bits & 0x7F800000u) == 0x7F800000u) return static_cast<uint16_t>(bits >> 16);  // inf
  const double below = std::abs(value - as_double(down)), above = std::abs(as_double(up) - value);
  if (below < above || (below == above && ((down >> 16) & 1u) == 0)) return static_cast<uint16_t>(down >> 16);
  return static_cast<uint16_t>(up >> 16);
}

float widen(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

// The bf16-wire average of two ranks' gradients, element by element.
at::Tensor reference_average(const at::Tensor& g0, const at::Tensor& g1) {
  const at::Tensor a = g0.contiguous(), b = g1.contiguous();
  at::Tensor out = at::empty_like(a);
  const float *x = a.data_ptr<float>(), *y = b.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double sum = double(widen(reference_bf16(x[i]))) + double(widen(reference_bf16(y[i])));
    o[i] = widen(reference_bf16(sum)) / 2.0f;
  }
  return out;
}

// Both ranks hold these exact bits.
bool same_on_both_ranks(hpctrain::dist::Comm& comm, const at::Tensor& values) {
  at::Tensor theirs = values.detach().clone().contiguous();
  comm.broadcast(theirs.data_ptr(), static_cast<std::size_t>(theirs.nbytes()), 0);
  return comm.any(!at::equal(theirs, values)) == false;
}

void check_step(hpctrain::dist::Comm& comm, const Params& params, const std::vector<at::Tensor>& g0,
                const std::vector<at::Tensor>& g1, const std::string& context) {
  bool differs_from_fp32 = false;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& grad = params[i].second.grad();
    const at::Tensor exact = (g0[i] + g1[i]) / 2;
    const at::Tensor expected = reference_average(g0[i], g1[i]);
    EXPECT(at::equal(grad, expected), "{}: {} differs from the reference bf16 average by {}", context, params[i].first,
           (grad - expected).abs().max().item<double>());
    // Two roundings of each rank's share (pack, then the sum), float32's own 2^-24 inside the sum.
    const at::Tensor bound = (2 * kUnitRoundoff + std::ldexp(1.0, -23)) * (g0[i].abs() + g1[i].abs()) / 2;
    const double excess = ((grad - exact).abs() - bound).max().item<double>();
    EXPECT(excess <= 0, "{}: {} is further than bf16 rounding from the exact average (by {})", context,
           params[i].first, excess);
    differs_from_fp32 = differs_from_fp32 || !at::equal(grad, exact);
    EXPECT(same_on_both_ranks(comm, grad), "{}: the ranks hold different averages of {}", context, params[i].first);
  }
  EXPECT(differs_from_fp32, "{}: the bf16 average equals the float32 one bit for bit (nothing was rounded)", context);
}

void sgd_step(Params& params) {
  at::NoGradGuard no_grad;
  for (auto& [name, t] : params) t.sub_(t.grad() * 0.1);
}

}  // namespace

void bf16_wire(hpctrain::dist::Comm& comm) {
  for (const bool overlap : {true, false}) {
    Params params = make_params(), fp32_twin = make_params();
    // Caps of 1 byte: one bucket per parameter, the table alone and row-sparse, carrying the late flags.
    ReducerOptions bf16_options{1, 1, overlap};
    bf16_options.wire_dtype = hpctrain::dist::DType::bf16;
    GradientReducer reducer(comm, params, bf16_options), twin(comm, fp32_twin, ReducerOptions{1, 1, overlap});
    for (int step = 0; step < 3; ++step) {
      const std::string context = fmt::format("overlap={} step {}", overlap, step);
      const auto g0 = local_gradients(params, 0, step), g1 = local_gradients(params, 1, step);
      for (Params* p : {&params, &fp32_twin}) {
        for (auto& [name, t] : *p) t.mutable_grad() = at::Tensor();
        loss_of(*p, rows_of(comm.rank(), step)).backward();
      }
      EXPECT(reducer.finalize().empty() && twin.finalize().empty(), "{}: unexpected warnings", context);
      check_step(comm, params, g0, g1, context);
      // The row marks (one byte per table row) are exact in both; every gradient byte count halves.
      const int64_t bf16_bytes = reducer.last_step_stats().bytes_reduced, fp32_bytes = twin.last_step_stats().bytes_reduced;
      if (step == 0)
        EXPECT(2 * (bf16_bytes - kTableRows) == fp32_bytes - kTableRows, "{}: bf16 sent {} bytes, fp32 {} (marks {})",
               context, bf16_bytes, fp32_bytes, kTableRows);
      sgd_step(params);
      sgd_step(fp32_twin);
    }
    for (const auto& [name, t] : params) EXPECT(same_on_both_ranks(comm, t), "parameter {} differs between ranks", name);
  }
}

}  // namespace mpi_test
