// Note [Row-sparse buckets] on two ranks: an embedding-shaped gradient reduced by rows must equal the
// dense average exactly, whichever rows each rank touches, and must send fewer bytes when few rows are
// touched; with most rows touched it falls back to the dense reduction.
#include <ATen/ATen.h>

#include "harness.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"

using hpctrain::ddp::GradientReducer;
using hpctrain::ddp::ReducerOptions;

namespace mpi_test {
namespace {

constexpr int64_t kRows = 2048, kWidth = 16;

// [embedding [kRows, kWidth], head [kWidth, 3]]: both start equal on every rank.
std::vector<std::pair<std::string, at::Tensor>> make_params() {
  at::manual_seed(11);
  return {{"embedding.weight", at::randn({kRows, kWidth}, at::kFloat).requires_grad_(true)},
          {"head.weight", at::randn({kWidth, 3}, at::kFloat).requires_grad_(true)}};
}

// This rank's tokens: a shared block plus rank-specific rows (`many`: most of the table).
at::Tensor tokens_for(int rank, int step, bool many) {
  if (many) return at::arange(rank, kRows, 1 + rank + step % 2, at::kLong);
  return at::tensor(std::vector<int64_t>{5, 6, 7, 100 + 40 * rank + step, 2000 - rank, 1500 + step}, at::kLong);
}

at::Tensor loss_of(const std::vector<std::pair<std::string, at::Tensor>>& params, const at::Tensor& tokens) {
  const at::Tensor hidden = at::embedding(params[0].second, tokens);
  return at::matmul(hidden, params[1].second).sin().sum();
}

// Both ranks' gradients averaged, computed locally on detached copies.
std::vector<at::Tensor> expected_average(const std::vector<std::pair<std::string, at::Tensor>>& params, int step,
                                         bool many) {
  std::vector<at::Tensor> sum;
  for (int r = 0; r < 2; ++r) {
    std::vector<at::Tensor> copies;
    for (const auto& [name, t] : params) copies.push_back(t.detach().clone().requires_grad_(true));
    const at::Tensor hidden = at::embedding(copies[0], tokens_for(r, step, many));
    at::matmul(hidden, copies[1]).sin().sum().backward();
    for (std::size_t i = 0; i < copies.size(); ++i) {
      if (r == 0) sum.push_back(copies[i].grad());
      else sum[i] = sum[i] + copies[i].grad();
    }
  }
  for (auto& s : sum) s = s / 2;
  return sum;
}

}  // namespace

void row_sparse_buckets(hpctrain::dist::Comm& comm) {
  for (const bool overlap : {true, false}) {
    for (const bool many : {false, true}) {
      const std::string context = fmt::format("overlap={} {} rows touched", overlap, many ? "most" : "few");
      auto params = make_params();
      // Caps of 1 byte: one bucket per parameter, so the embedding stands alone (the last bucket, with
      // the late-gradient flags when overlapping).
      GradientReducer reducer(comm, params, ReducerOptions{1, 1, overlap});
      for (int step = 0; step < 2; ++step) {
        const auto expected = expected_average(params, step, many);
        for (auto& [name, t] : params) t.mutable_grad() = at::Tensor();
        loss_of(params, tokens_for(comm.rank(), step, many)).backward();
        const std::string warning = reducer.finalize();
        EXPECT(warning.empty(), "{}: unexpected warning {}", context, warning);
        for (std::size_t i = 0; i < params.size(); ++i) {
          const at::Tensor& grad = params[i].second.grad();
          EXPECT(at::equal(grad, expected[i]), "{} step {}: {} differs from the dense average by {}", context, step,
                 params[i].first, (grad - expected[i]).abs().max().item<double>());
        }
        const int64_t dense_bytes = (kRows * kWidth + kWidth * 3) * 4;
        const int64_t sent = reducer.last_step_stats().bytes_reduced;
        if (many) {
          EXPECT(sent >= dense_bytes, "{}: {} bytes sent, dense needs {}", context, sent, dense_bytes);
        } else {
          EXPECT(sent < dense_bytes / 10, "{}: {} bytes sent, dense would send {}", context, sent, dense_bytes);
        }
      }
    }
  }
}

}  // namespace mpi_test
