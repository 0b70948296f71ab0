// The 4-bit base's products alone: hpctrain's fused float32 products (Note [Fused 4-bit product],
// src/models/nf4_matmul_cpu.cpp) against dequantize-then-multiply (the weight dequantized whole into float32 by
// dequantize_4bit, then at::linear / at::matmul through the BLAS: what hpctrain did before the fused products, and
// what bitsandbytes' CPU backend does in training), over the frozen linear layers of a Llama-shaped model: per layer
// q, k, v, o, gate, up, down, each one forward product (y = x Wᵀ) and one input gradient (dx = dy W), all layers'
// forwards first as in a step. Random NF4 weights (double quantization, blocks of 64); float32. The sides alternate,
// the first rotating each round; each round prints both times and the ratio, the end their medians, and the largest
// relative difference between the two sides' outputs (the same products in another order of float32 sums).
// Usage: bench_fused_product [--hidden 1024] [--intermediate 2816] [--kv 512] [--layers 24] [--tokens 128]
//                            [--threads 1] [--rounds 5]
// bench/qlora/run.sh runs it as PARTS=kernel; bench/README.md ("QLoRA") has its figures.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "hpctrain/models/nf4.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "models/fused_quant4.hpp"

using namespace hpctrain;

namespace {

struct Args {
  int64_t hidden = 1024, intermediate = 2816, kv = 512, layers = 24, tokens = 128;
  int threads = 1, rounds = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw std::runtime_error("missing value after " + flag);
    const std::string value = argv[++i];
    if (flag == "--hidden") a.hidden = std::stoll(value);
    else if (flag == "--intermediate") a.intermediate = std::stoll(value);
    else if (flag == "--kv") a.kv = std::stoll(value);
    else if (flag == "--layers") a.layers = std::stoll(value);
    else if (flag == "--tokens") a.tokens = std::stoll(value);
    else if (flag == "--threads") a.threads = std::stoi(value);
    else if (flag == "--rounds") a.rounds = std::stoi(value);
    else throw std::runtime_error("unknown option " + flag);
  }
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One side's pass over every weight: the forward products, then the input gradients. Outputs go into `out`, one
// tensor per product (overwritten each round), so that both sides' results can be compared.
struct Times {
  double forward = 0, backward = 0;
  [[nodiscard]] double total() const { return forward + backward; }
};

template <typename Product>
Times pass(const std::vector<models::Quant4Weight>& weights, const at::Tensor& x, std::vector<at::Tensor>& out,
           Product product) {
  Times t;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < weights.size(); ++i) out[i] = product(weights[i], x, /*input_gradient=*/false);
  t.forward = seconds_since(start);
  start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < weights.size(); ++i)
    out[weights.size() + i] = product(weights[i], x, /*input_gradient=*/true);
  t.backward = seconds_since(start);
  return t;
}

// One core's float32 FMA rate: 24 independent chains of AVX-512 FMAs (what a register tile at its best sustains), so
// that the products' GFLOP/s can be read against this core (a VM does not say which CPU generation it runs on).
__attribute__((target("avx512f"))) double fma_peak_gflops() {
  __m512 acc[24];
  for (int i = 0; i < 24; ++i) acc[i] = _mm512_set1_ps(0.001F * static_cast<float>(i));
  const __m512 a = _mm512_set1_ps(0.9999F), b = _mm512_set1_ps(1e-5F);
  constexpr int64_t kSteps = 20'000'000;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < kSteps; ++step) {
#pragma GCC unroll 24
    for (int i = 0; i < 24; ++i) acc[i] = _mm512_fmadd_ps(a, acc[i], b);
  }
  const double s = seconds_since(start);
  float lanes[16], sink = 0;
  for (int i = 0; i < 24; ++i) {
    _mm512_storeu_ps(lanes, acc[i]);
    for (const float lane : lanes) sink += lane;
  }
  return sink == 12345.0F ? 0 : static_cast<double>(kSteps) * 24 * 32 / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(a.threads);
  if (!models::quant4_product_fused(c10::Device(c10::kCPU), at::kFloat)) {
    fmt::print("bench_fused_product: no AVX-512 here, the float32 products are not fused: nothing to compare\n");
    return 0;
  }
  at::manual_seed(0);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{a.hidden, a.hidden}, {a.kv, a.hidden}, {a.kv, a.hidden},
                                                           {a.hidden, a.hidden}, {a.intermediate, a.hidden},
                                                           {a.intermediate, a.hidden}, {a.hidden, a.intermediate}};
  std::vector<models::Quant4Weight> weights;
  double flop = 0;
  for (int64_t layer = 0; layer < a.layers; ++layer)
    for (const auto& [out, in] : shapes) {
      weights.push_back(models::quantize_4bit(at::randn({out, in}) * 0.02, models::Quant4Options{}));
      flop += 2.0 * 2.0 * static_cast<double>(a.tokens * out * in);
    }
  // One input wide enough for every product: each takes its first `from` columns.
  const at::Tensor x = at::randn({a.tokens, std::max(a.hidden, a.intermediate)});
  const auto rows = [&](int64_t from) { return x.narrow(1, 0, from).contiguous(); };
  const auto fused = [&](const models::Quant4Weight& w, const at::Tensor&, bool input_gradient) {
    const models::detail::FusedQuant4Weight f(w);
    const int64_t from = input_gradient ? f.out_features() : f.in_features();
    const int64_t to = input_gradient ? f.in_features() : f.out_features();
    at::Tensor result = at::empty({a.tokens, to});
    if (input_gradient) f.input_grad_out(rows(from), result);
    else f.linear_out(rows(from), result);
    return result;
  };
  const auto dequantized = [&](const models::Quant4Weight& w, const at::Tensor&, bool input_gradient) {
    const at::Tensor weight = models::dequantize_4bit(w, at::kFloat);
    return input_gradient ? at::matmul(rows(w.shape[0]), weight) : at::linear(rows(w.shape[1]), weight);
  };

  fmt::print("bench_fused_product: {} layers (hidden {}, kv {}, intermediate {}), {} tokens, {} thread(s), {:.1f} "
             "GFLOP a pass\n", a.layers, a.hidden, a.kv, a.intermediate, a.tokens, a.threads, flop / 1e9);
  fmt::print("one core's FMA rate (24 independent AVX-512 FMA chains): {:.1f} GFLOP/s\n", fma_peak_gflops());
  std::vector<at::Tensor> fused_out(2 * weights.size()), peer_out(2 * weights.size());
  pass(weights, x, fused_out, fused);  // warm-up: buffers, page faults
  pass(weights, x, peer_out, dequantized);
  std::vector<double> fused_s, peer_s, ratio;
  for (int round = 0; round < a.rounds; ++round) {
    Times f, p;
    if (round % 2 == 0) f = pass(weights, x, fused_out, fused), p = pass(weights, x, peer_out, dequantized);
    else p = pass(weights, x, peer_out, dequantized), f = pass(weights, x, fused_out, fused);
    fused_s.push_back(f.total()), peer_s.push_back(p.total()), ratio.push_back(p.total() / f.total());
    fmt::print("round {}: fused {:.3f} s (forward {:.3f}, backward {:.3f}; {:.1f} GFLOP/s), dequantize + BLAS {:.3f} s "
               "(forward {:.3f}, backward {:.3f}; {:.1f} GFLOP/s), ratio {:.2f}\n", round + 1, f.total(), f.forward,
               f.backward, flop / f.total() / 1e9, p.total(), p.forward, p.backward, flop / p.total() / 1e9,
               p.total() / f.total());
  }
  double worst = 0;
  for (size_t i = 0; i < fused_out.size(); ++i)
    worst = std::max(worst, (fused_out[i] - peer_out[i]).abs().max().item<double>() /
                                std::max(peer_out[i].abs().max().item<double>(), 1e-30));
  fmt::print("median: fused {:.3f} s, dequantize + BLAS {:.3f} s; dequantize + BLAS / fused {:.2f} (min {:.2f}, max "
             "{:.2f}); largest relative difference {:.1e}\n", median(fused_s), median(peer_s), median(ratio),
             *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()), worst);
  return 0;
}
