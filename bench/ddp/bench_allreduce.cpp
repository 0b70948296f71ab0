// Fused allreduce throughput vs bucket size, against per-tensor allreduce of the same bytes (the peer:
// what DDP-style bucketing buys). Torch-free: it times dist::Comm::allreduce on float32 buffers.
//   mpirun -np 2 bench_allreduce [total_mib=64] [tensor_kib=16] [repeats=5]
// total_mib: bytes reduced per measurement (one "step" of gradients); tensor_kib: tensor size of the
// per-tensor peer. Bandwidths are in GB/s (1e9 bytes/s): algbw = bytes / time, busbw = algbw * 2(n-1)/n.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"

namespace {

using hpctrain::dist::Comm;

struct Settings {
  std::size_t total_bytes = std::size_t{64} << 20;
  std::size_t tensor_bytes = std::size_t{16} << 10;
  int repeats = 5;
};

Settings parse(int argc, char** argv) {
  Settings settings;
  if (argc > 1) settings.total_bytes = std::stoul(argv[1]) << 20;
  if (argc > 2) settings.tensor_bytes = std::stoul(argv[2]) << 10;
  if (argc > 3) settings.repeats = std::stoi(argv[3]);
  HPCTRAIN_CHECK(settings.total_bytes > 0 && settings.tensor_bytes > 0 && settings.repeats > 0,
                 "usage: bench_allreduce [total_mib>0] [tensor_kib>0] [repeats>0]");
  return settings;
}

// Seconds to allreduce `buffer` as consecutive calls of at most `chunk_bytes`: the median over repeats
// of the slowest rank.
double time_reduction(Comm& comm, std::vector<float>& buffer, std::size_t chunk_bytes, int repeats) {
  const std::size_t chunk = std::max<std::size_t>(1, chunk_bytes / sizeof(float));
  std::vector<double> samples;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t offset = 0; offset < buffer.size(); offset += chunk) {
      comm.allreduce(buffer.data() + offset, std::min(chunk, buffer.size() - offset));
    }
    const double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    samples.push_back(comm.allreduce_value(local, hpctrain::dist::ReduceOp::max));
  }
  std::nth_element(samples.begin(), samples.begin() + repeats / 2, samples.end());
  return samples[static_cast<std::size_t>(repeats / 2)];
}

void check_sum(Comm& comm) {
  std::vector<float> values(1000, static_cast<float>(comm.rank() + 1));
  comm.allreduce(values.data(), values.size());
  const float expected = static_cast<float>(comm.world_size() * (comm.world_size() + 1) / 2);
  HPCTRAIN_CHECK(std::all_of(values.begin(), values.end(), [&](float v) { return v == expected; }),
                 "allreduce returned a wrong sum on rank {}", comm.rank());
}

void run(Comm& comm, const Settings& settings) {
  check_sum(comm);
  std::vector<float> buffer(settings.total_bytes / sizeof(float), 0.0f);
  const double bytes = static_cast<double>(buffer.size() * sizeof(float));
  const double bus_factor = 2.0 * (comm.world_size() - 1) / comm.world_size();
  const double per_tensor = time_reduction(comm, buffer, settings.tensor_bytes, settings.repeats);
  if (comm.rank() == 0) {
    fmt::print("allreduce of {:.1f} MiB float32 on {} ranks, median of {} repeats\n", bytes / (1 << 20),
               comm.world_size(), settings.repeats);
    fmt::print("{:>14} {:>8} {:>10} {:>12} {:>12} {:>16}\n", "bucket", "calls", "ms", "algbw GB/s", "busbw GB/s",
               "vs per-tensor");
  }
  auto report = [&](const std::string& label, std::size_t chunk_bytes, double seconds) {
    if (comm.rank() != 0) return;
    const std::size_t calls = (settings.total_bytes + chunk_bytes - 1) / chunk_bytes;
    fmt::print("{:>14} {:>8} {:>10.2f} {:>12.2f} {:>12.2f} {:>15.2f}x\n", label, calls, seconds * 1e3,
               bytes / seconds / 1e9, bytes / seconds / 1e9 * bus_factor, per_tensor / seconds);
  };
  report(fmt::format("per-tensor {}K", settings.tensor_bytes >> 10), settings.tensor_bytes, per_tensor);
  for (std::size_t kib : {64, 256, 1024, 4096, 16384, 25600, 65536}) {
    const std::size_t bucket_bytes = kib << 10;
    if (bucket_bytes > settings.total_bytes && kib != 64) break;
    report(fmt::format("{}K", kib), bucket_bytes, time_reduction(comm, buffer, bucket_bytes, settings.repeats));
  }
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::dist::MpiRuntime runtime(&argc, &argv);
  Comm& comm = runtime.world();
  try {
    run(comm, parse(argc, argv));
  } catch (const std::exception& error) {
    fmt::print(stderr, "[rank {}] bench_allreduce: {}\n", comm.rank(), error.what());
    comm.abort(1);
  }
  return 0;
}
