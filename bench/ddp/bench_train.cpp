// Data-parallel training step throughput of hpctrain (the peer is bench/ddp/torch_ddp.py, PyTorch DDP on
// gloo; both are run by bench/ddp/run.sh). A step: zero grads, forward on this rank's random batch,
// Accelerator::backward (gradients averaged over ranks: fused buckets, overlapped with backward unless
// --overlap off), AdamW step. Steps with gradient sync off never exchange gradients (DDP's no_sync()):
// the compute-only step time, from which run.sh derives the exposed-communication share the same way for
// both sides.
//
// Measurement (the same in torch_ddp.py): every step starts from a barrier (not timed), and its time is
// the slowest rank's (the job's). With --sync alternate (the default) synced and unsynced steps alternate
// in one process, so both see the same machine state and the exposed share is a paired comparison rather
// than one between runs minutes apart. Rank 0 prints one JSON line: {"impl","model","ranks","threads",
// "on": {"median_s","samples_per_s",...}, "off": {...}} with "on"/"off" present when measured.
//
//   mpirun -np N bench_train --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
//                            [--overlap on|off] [--sync alternate|on|off]
//   (S steps of each measured kind, after W warm-up steps.)
#include "../models/benchmark_models.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

using namespace hpctrain;

struct Settings {
  std::string model = "distilbert";
  int threads = 1;
  int steps = 10;
  int warmup = 2;
  bool overlap = true;
  std::string sync = "alternate";  // alternate | on | off
};

bool on_off(const std::string& option, const std::string& value) {
  if (value == "on") return true;
  if (value == "off") return false;
  std::cerr << "bench_train: " << option << " must be on or off, got '" << value << "'\n";
  std::exit(2);
}

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "bench_train: " << arg << " needs a value\n";
      std::exit(2);
    }
    const std::string value = argv[++i];
    if (arg == "--model") s.model = value;
    else if (arg == "--threads") s.threads = std::stoi(value);
    else if (arg == "--steps") s.steps = std::stoi(value);
    else if (arg == "--warmup") s.warmup = std::stoi(value);
    else if (arg == "--overlap") s.overlap = on_off(arg, value);
    else if (arg == "--sync") s.sync = value;
    else {
      std::cerr << "bench_train: unknown option " << arg << "\n";
      std::exit(2);
    }
  }
  if (s.steps < 1 || s.warmup < 0 || s.threads < 1 || (s.sync != "alternate" && s.sync != "on" && s.sync != "off")) {
    std::cerr << "bench_train: need --steps >= 1, --warmup >= 0, --threads >= 1, --sync alternate|on|off\n";
    std::exit(2);
  }
  return s;
}

// Per-step figures, in this order; each step's values are the slowest rank's.
constexpr std::array<const char*, 6> kFigures = {"median_s",    "forward_s",         "backward_s",
                                                 "optimizer_s", "reducer_exposed_s", "reducer_allreduce_s"};
using Series = std::array<std::vector<double>, kFigures.size()>;  // one kind of step (synced or not)

nlohmann::json summary(const Series& series, double samples_per_step) {
  nlohmann::json out;
  for (std::size_t i = 0; i < kFigures.size(); ++i) out[kFigures[i]] = bench::median(series[i]);
  out["samples_per_s"] = samples_per_step / out["median_s"].get<double>();
  out["min_s"] = *std::min_element(series[0].begin(), series[0].end());
  return out;
}

int run(dist::Comm& comm, const Settings& s) {
  train::AcceleratorOptions options;
  options.threads = s.threads;
  options.overlap = s.overlap;
  train::Accelerator acc(comm, options);
  torch::manual_seed(0);
  const auto model = models::from_config(io::HfConfig::from_json(bench::benchmark_config(s.model), "bench_train"));
  acc.prepare_model(*model);
  const auto optimizer = train::make_optimizer(train::OptimizerOptions{}, model->named_parameters().pairs());  // AdamW
  model->train();
  torch::manual_seed(1 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const models::ModelInputs inputs = bench::benchmark_inputs(s.model);

  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  Series synced, unsynced;
  const int measured = s.sync == "alternate" ? 2 * s.steps : s.steps;
  for (int step = 0; step < s.warmup + measured; ++step) {
    const bool sync = s.sync == "alternate" ? step % 2 == 0 : s.sync == "on";
    acc.set_gradient_sync(sync);
    acc.wait_for_everyone();
    const auto start = Clock::now();
    acc.zero_grad();
    const models::ModelOutput out = model->forward(inputs);
    const auto forward_done = Clock::now();
    acc.backward(out.loss);
    const auto backward_done = Clock::now();
    optimizer->step(1e-4);
    const auto stop = Clock::now();
    const ddp::ReducerStats& stats = acc.reducer().last_step_stats();
    std::array<double, kFigures.size()> figures = {seconds(start, stop),
                                                   seconds(start, forward_done),
                                                   seconds(forward_done, backward_done),
                                                   seconds(backward_done, stop),
                                                   sync ? stats.exposed_seconds : 0.0,
                                                   sync ? stats.allreduce_seconds : 0.0};
    // Reduced after the clock stopped: the figures are the job's, i.e. the slowest rank's.
    comm.allreduce(figures.data(), figures.size(), dist::ReduceOp::max);
    if (step < s.warmup) continue;
    Series& series = sync ? synced : unsynced;
    for (std::size_t i = 0; i < figures.size(); ++i) series[i].push_back(figures[i]);
  }
  if (comm.is_main_process()) {
    const double samples = static_cast<double>(bench::benchmark_batch(s.model) * comm.world_size());
    nlohmann::json result{{"impl", "hpctrain"},          {"model", s.model},
                          {"ranks", comm.world_size()},  {"threads", s.threads},
                          {"overlap", acc.reducer().overlap()}, {"steps", s.steps}};
    if (!synced[0].empty()) result["on"] = summary(synced, samples);
    if (!unsynced[0].empty()) result["off"] = summary(unsynced, samples);
    std::cout << result.dump() << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dist::MpiRuntime runtime(&argc, &argv);
  const Settings settings = parse(argc, argv);
  try {
    return run(runtime.world(), settings);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] bench_train: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);
  }
}
