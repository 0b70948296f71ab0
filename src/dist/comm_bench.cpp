// comm_bench.hpp: allreduce timings and the ring α-β fit (Note [Ring alpha-beta]).
#include "hpctrain/dist/comm_bench.hpp"

#include <algorithm>
#include <chrono>

#include "hpctrain/core/error.hpp"

namespace hpctrain::dist {

std::vector<int64_t> message_sizes(int64_t min_bytes, int64_t max_bytes, int factor) {
  HPCTRAIN_CHECK(min_bytes >= 4 && max_bytes >= min_bytes, "message sizes: need 4 <= min ({}) <= max ({}) bytes",
                 min_bytes, max_bytes);
  HPCTRAIN_CHECK(factor >= 2, "message sizes: the factor must be at least 2, got {}", factor);
  std::vector<int64_t> sizes;
  for (int64_t n = min_bytes; n <= max_bytes; n *= factor) sizes.push_back(n / 4 * 4);
  return sizes;
}

namespace {

// Seconds of one allreduce on `buffer`, the slowest rank's.
double time_one(Comm& comm, std::vector<float>& buffer) {
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  comm.allreduce(buffer.data(), buffer.size());
  const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return comm.allreduce_value(local, ReduceOp::max);
}

AllreduceTiming summarize(int64_t bytes, std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  AllreduceTiming t;
  t.bytes = bytes;
  t.repetitions = static_cast<int>(seconds.size());
  const std::size_t mid = seconds.size() / 2;
  t.median_s = seconds.size() % 2 == 1 ? seconds[mid] : (seconds[mid - 1] + seconds[mid]) / 2;
  t.min_s = seconds.front();
  t.max_s = seconds.back();
  return t;
}

}  // namespace

std::vector<AllreduceTiming> time_allreduce(Comm& comm, const std::vector<int64_t>& sizes, int warmup, int repetitions) {
  HPCTRAIN_CHECK(repetitions >= 1 && warmup >= 0, "bench comm: need repetitions >= 1 and warm-up >= 0, got {} and {}",
                 repetitions, warmup);
  std::vector<AllreduceTiming> out;
  for (const int64_t bytes : sizes) {
    std::vector<float> buffer(static_cast<std::size_t>(bytes / 4), 1.0F);
    for (int i = 0; i < warmup; ++i) time_one(comm, buffer);
    std::vector<double> seconds;
    for (int i = 0; i < repetitions; ++i) seconds.push_back(time_one(comm, buffer));
    out.push_back(summarize(bytes, std::move(seconds)));
  }
  return out;
}

AlphaBeta fit_ring_alpha_beta(const std::vector<AllreduceTiming>& timings, int world_size) {
  HPCTRAIN_CHECK(world_size >= 1, "alpha-beta fit: world size {} < 1", world_size);
  // Weighted least squares for t = a + b n with weights w = 1 / t^2 (normal equations).
  double sw = 0, sn = 0, st = 0, snn = 0, snt = 0;
  for (const AllreduceTiming& x : timings) {
    HPCTRAIN_CHECK(x.median_s > 0, "alpha-beta fit: the {}-byte median is {} s, not positive", x.bytes, x.median_s);
    const double w = 1 / (x.median_s * x.median_s), n = static_cast<double>(x.bytes);
    sw += w, sn += w * n, st += w * x.median_s, snn += w * n * n, snt += w * n * x.median_s;
  }
  const double det = sw * snn - sn * sn;
  HPCTRAIN_CHECK(timings.size() >= 2 && det > 0, "alpha-beta fit: needs at least two distinct message sizes, got {}",
                 timings.size());
  double a = (snn * st - sn * snt) / det, b = (sw * snt - sn * st) / det;
  // Neither a latency nor a time per byte is negative: refit the other alone (the constrained least squares).
  if (a < 0) a = 0, b = snt / snn;
  if (b < 0) b = 0, a = st / sw;
  if (world_size == 1) return {a, b};
  const double p = world_size, steps = 2 * (p - 1);
  return {a / steps, b / (steps / p)};
}

double ring_allreduce_seconds(const AlphaBeta& model, int64_t bytes, int world_size) {
  if (world_size <= 1) return 0;
  const double p = world_size, steps = 2 * (p - 1);
  return steps * model.alpha_s + steps / p * static_cast<double>(bytes) * model.beta_s_per_byte;
}

}  // namespace hpctrain::dist
