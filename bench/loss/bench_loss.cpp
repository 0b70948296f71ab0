// The head + cross-entropy of a causal LM alone, forward and backward, at several --loss-chunk-tokens values: the
// time of models::linear_cross_entropy (Note [Chunked loss]) and the peak resident growth of one call, for choosing
// the default chunk. Random hidden states [tokens, width] (requires grad), an untied head weight [vocab, width]
// (requires grad) and random targets; fp32 (or bf16 autocast with --bf16). Rounds interleave the chunk sizes;
// each prints the median, min and max over the rounds of the wall time and of the process's CPU time (steadier on a
// shared machine; run with --threads 1 for it to be the work done).
// Usage: bench_loss [--tokens 4096] [--width 512] [--vocab 128256] [--threads 2] [--rounds 5] [--bf16]
//                   [--chunks 0,64,128,256,512,1024,2048]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/loss.hpp"

using namespace hpctrain;

namespace {

struct Args {
  int64_t tokens = 4096, width = 512, vocab = 128256;
  int threads = 2, rounds = 5;
  bool bf16 = false;
  std::vector<int64_t> chunks{0, 64, 128, 256, 512, 1024, 2048};
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error("missing value after " + flag);
      return argv[++i];
    };
    if (flag == "--tokens") a.tokens = std::stoll(next());
    else if (flag == "--width") a.width = std::stoll(next());
    else if (flag == "--vocab") a.vocab = std::stoll(next());
    else if (flag == "--threads") a.threads = std::stoi(next());
    else if (flag == "--rounds") a.rounds = std::stoi(next());
    else if (flag == "--bf16") a.bf16 = true;
    else if (flag == "--chunks") {
      a.chunks.clear();
      std::stringstream list(next());
      for (std::string item; std::getline(list, item, ',');) a.chunks.push_back(std::stoll(item));
    } else {
      throw std::runtime_error("unknown option " + flag);
    }
  }
  return a;
}

struct Measured {
  double seconds = 0, cpu_seconds = 0;  // wall, and the process's user + system CPU time
  int64_t peak_bytes = 0;
};

double cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

Measured run_once(const Args& a, int64_t chunk, const at::Tensor& hidden, const models::LmHead& head,
                  const at::Tensor& targets) {
  hidden.mutable_grad() = at::Tensor();
  head.weight.mutable_grad() = at::Tensor();
  (void)core::reset_peak_resident();
  const int64_t before = core::resident_bytes().value_or(0);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = cpu_seconds();
  {
    at::Tensor sum;
    {
      std::optional<compat::AutocastScope> bf16;
      if (a.bf16) bf16.emplace(at::kCPU, true, at::kBFloat16);
      sum = models::linear_cross_entropy(hidden, head, targets, chunk).sum;
    }
    sum.backward();
  }
  Measured m;
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  m.cpu_seconds = cpu_seconds() - cpu_start;
  m.peak_bytes = core::peak_resident_bytes().value_or(0) - before;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  at::set_num_threads(a.threads);
  const core::LiveTensorResidency live;  // the live tensors' peak (estimate-memory --measure's reading)
  at::manual_seed(0);
  const at::Tensor hidden = at::randn({a.tokens, a.width}).requires_grad_(true);
  models::LmHead head;
  head.weight = (at::randn({a.vocab, a.width}) * 0.02).requires_grad_(true);
  const at::Tensor targets = at::randint(a.vocab, {a.tokens}, at::kLong);
  fmt::print("bench_loss: {} tokens, width {}, vocabulary {}, {}, {} thread(s), {} rounds (+1 warm-up)\n", a.tokens,
             a.width, a.vocab, a.bf16 ? "bf16 autocast" : "fp32", a.threads, a.rounds);
  std::map<int64_t, std::vector<Measured>> runs;
  for (int round = 0; round <= a.rounds; ++round) {
    std::vector<int64_t> order = a.chunks;
    std::rotate(order.begin(), order.begin() + round % static_cast<int>(order.size()), order.end());
    for (const int64_t chunk : order) {
      const Measured m = run_once(a, chunk, hidden, head, targets);
      if (round > 0) runs[chunk].push_back(m);
    }
  }
  fmt::print("| --loss-chunk-tokens | forward + backward s, median (min-max) | CPU s, median (min-max) | peak growth MiB |\n");
  fmt::print("|---:|---:|---:|---:|\n");
  const auto cell = [](std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return fmt::format("{:.2f} ({:.2f}-{:.2f})", values[values.size() / 2], values.front(), values.back());
  };
  for (const int64_t chunk : a.chunks) {
    std::vector<double> seconds, cpu;
    std::vector<int64_t> peaks;
    for (const Measured& m : runs[chunk]) seconds.push_back(m.seconds), cpu.push_back(m.cpu_seconds), peaks.push_back(m.peak_bytes);
    std::sort(peaks.begin(), peaks.end());
    fmt::print("| {} | {} | {} | {:.0f} |\n", chunk == 0 ? std::string("0 (unchunked)") : std::to_string(chunk),
               cell(seconds), cell(cpu), static_cast<double>(peaks[peaks.size() / 2]) / (1 << 20));
  }
  return 0;
}
