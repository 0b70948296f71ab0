// `hpctrain bench comm` (allreduce latency and bandwidth by size, the fitted ring α-β) and `hpctrain bench
// predict` (step time and scaling efficiency on nodes × GPUs from one rank's step and an α-β).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_machine.hpp"
#include "commands.hpp"
#include "hpctrain/core/cpu_info.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm_bench.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/train/scaling_model.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

constexpr const char* kCommUsage =
    "hpctrain bench comm [--min-size 1KiB] [--max-size 256MiB] [--factor 4] [--warmup 3] [--repetitions 10] [--json]"
    "   (under mpirun -np N / srun)";
constexpr const char* kRingModel = "ring: t = 2(p-1)·alpha + 2(p-1)/p·n·beta, least squares on relative error";

}  // namespace

nlohmann::json bench_machine_json() {
  return {{"cpu", core::cpu_model()}, {"cpu_flags", core::capability_summary(core::cpu_flags())},
          {"openblas_core", core::openblas_core()}};
}

void print_bench_machine(const nlohmann::json& m) {
  std::printf("# CPU: %s; %s; OpenBLAS kernels %s\n", m["cpu"].get<std::string>().c_str(),
              m["cpu_flags"].get<std::string>().c_str(), m["openblas_core"].get<std::string>().c_str());
}

namespace {

int64_t size_option(const std::string& option, const std::string& text) {
  const auto bytes = static_cast<int64_t>(io::parse_size(text));
  HPCTRAIN_CHECK(bytes >= 4, "bench comm: {} {} is below 4 bytes (one float)", option, text);
  return bytes;
}

double gb_per_s(double bytes, double seconds) { return bytes / seconds / 1e9; }

nlohmann::json comm_json(const std::vector<dist::AllreduceTiming>& timings, const dist::AlphaBeta& fit, int ranks) {
  nlohmann::json sizes = nlohmann::json::array();
  const double bus = ranks > 1 ? 2.0 * (ranks - 1) / ranks : 1.0;  // bytes one link carries per payload byte
  for (const auto& t : timings)
    sizes.push_back({{"bytes", t.bytes}, {"median_s", t.median_s}, {"min_s", t.min_s}, {"max_s", t.max_s},
                     {"repetitions", t.repetitions}, {"algorithm_gbps", 8 * gb_per_s(t.bytes, t.median_s)},
                     {"bus_gbps", 8 * bus * gb_per_s(t.bytes, t.median_s)},
                     {"model_s", dist::ring_allreduce_seconds(fit, t.bytes, ranks)}});
  return {{"ranks", ranks}, {"machine", bench_machine_json()}, {"sizes", sizes},
          {"fit", {{"model", kRingModel}, {"alpha_s", fit.alpha_s}, {"beta_s_per_byte", fit.beta_s_per_byte},
                   {"link_gbps", 8e-9 / fit.beta_s_per_byte}}}};
}

std::string size_text(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} B", bytes);
}

void print_comm_table(const nlohmann::json& j) {
  print_bench_machine(j["machine"]);
  std::printf("allreduce (sum, float32) over %d ranks; each repetition timed as the slowest rank's, from a barrier\n",
              j["ranks"].get<int>());
  std::printf("%10s %12s %12s %12s %12s %12s %12s\n", "size", "median us", "min us", "max us", "alg Gb/s",
              "bus Gb/s", "model us");
  for (const auto& s : j["sizes"])
    std::printf("%10s %12.1f %12.1f %12.1f %12.2f %12.2f %12.1f\n", size_text(s["bytes"]).c_str(),
                1e6 * s["median_s"].get<double>(), 1e6 * s["min_s"].get<double>(), 1e6 * s["max_s"].get<double>(),
                s["algorithm_gbps"].get<double>(), s["bus_gbps"].get<double>(), 1e6 * s["model_s"].get<double>());
  const auto& f = j["fit"];
  std::printf("fit to sizes >= %s (%s): alpha = %.2f us, beta = %.4f ns/byte (%.2f Gb/s per link)\n",
              size_text(f["min_bytes"]).c_str(), kRingModel,
              1e6 * f["alpha_s"].get<double>(), 1e9 * f["beta_s_per_byte"].get<double>(), f["link_gbps"].get<double>());
}

}  // namespace

int bench_comm_command(const Args& args, dist::Comm& comm) {
  std::string min_size = "1KiB", max_size = "256MiB", fit_min_size = "0";
  int factor = 4, warmup = 3, repetitions = 10;
  bool json = false;
  po::options_description options(kCommUsage);
  options.add_options()
      ("min-size", po::value(&min_size)->default_value(min_size), "smallest message (e.g. 1KiB)")
      ("max-size", po::value(&max_size)->default_value(max_size), "largest message (e.g. 64KiB, 256MiB)")
      ("factor", po::value(&factor)->default_value(factor), "each size is the previous one times this (2 or 4)")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed allreduces per size")
      ("repetitions", po::value(&repetitions)->default_value(repetitions), "timed allreduces per size (median, min, max)")
      ("fit-min-size", po::value(&fit_min_size)->default_value(fit_min_size),
       "fit α-β to the sizes from this one up (e.g. 1MiB: the gradient buckets' range); 0: all")
      ("json", po::bool_switch(&json), "print JSON instead of the table");
  po::variables_map values;
  if (!parse_options(args, kCommUsage, options, values)) return 0;
  const auto fit_from = static_cast<int64_t>(io::parse_size(fit_min_size));
  const auto sizes = dist::message_sizes(size_option("--min-size", min_size), size_option("--max-size", max_size), factor);
  HPCTRAIN_CHECK(sizes.size() >= 2, "bench comm: --min-size {} to --max-size {} gives {} size; the α-β fit needs two",
                 min_size, max_size, sizes.size());
  const auto timings = dist::time_allreduce(comm, sizes, warmup, repetitions);
  if (!comm.is_main_process()) return 0;
  std::vector<dist::AllreduceTiming> fitted;
  std::copy_if(timings.begin(), timings.end(), std::back_inserter(fitted), [&](const auto& t) { return t.bytes >= fit_from; });
  HPCTRAIN_CHECK(fitted.size() >= 2, "bench comm: --fit-min-size {} leaves {} of the sizes; the α-β fit needs two",
                 fit_min_size, fitted.size());
  nlohmann::json j = comm_json(timings, dist::fit_ring_alpha_beta(fitted, comm.world_size()), comm.world_size());
  j["fit"]["min_bytes"] = fitted.front().bytes;
  if (json) std::printf("%s\n", j.dump(2).c_str());
  else print_comm_table(j);
  return 0;
}

}  // namespace hpctrain::cli
