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
#include "hpctrain/train/adamw.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include <algorithm>
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

// Per-step figures of one kind of step (synced or not), each the slowest rank's.
struct Series {
  std::vector<double> step, forward, backward, optimizer, exposed, allreduce;
};

nlohmann::json summary(const Series& series, double samples_per_step) {
  const double step = bench::median(series.step);
  return {{"median_s", step},
          {"samples_per_s", samples_per_step / step},
          {"min_s", *std::min_element(series.step.begin(), series.step.end())},
          {"forward_s", bench::median(series.forward)},
          {"backward_s", bench::median(series.backward)},
          {"optimizer_s", bench::median(series.optimizer)},
          {"reducer_exposed_s", bench::median(series.exposed)},
          {"reducer_allreduce_s", bench::median(series.allreduce)}};
}

int run(dist::Comm& comm, const Settings& s) {
  train::AcceleratorOptions options;
  options.threads = s.threads;
  options.overlap = s.overlap;
  train::Accelerator acc(comm, options);
  torch::manual_seed(0);
  const auto model = models::from_config(io::HfConfig::from_json(bench::benchmark_config(s.model), "bench_train"));
  acc.prepare_model(*model);
  train::AdamW optimizer(model->named_parameters().pairs(), train::AdamWOptions{});
  model->train();
  torch::manual_seed(1 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const models::ModelInputs inputs = bench::benchmark_inputs(s.model);

  using Clock = std::chrono::steady_clock;
  auto slowest = [&](Clock::time_point a, Clock::time_point b) {
    return comm.allreduce_value(std::chrono::duration<double>(b - a).count(), dist::ReduceOp::max);
  };
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
    optimizer.step(1e-4);
    const auto stop = Clock::now();
    // Reduced after the clock stopped: the figures are the job's, i.e. the slowest rank's.
    Series& series = sync ? synced : unsynced;
    const double step_s = slowest(start, stop), forward_s = slowest(start, forward_done),
                 backward_s = slowest(forward_done, backward_done), optimizer_s = slowest(backward_done, stop);
    const ddp::ReducerStats& stats = acc.reducer().last_step_stats();
    const double exposed_s = comm.allreduce_value(sync ? stats.exposed_seconds : 0.0, dist::ReduceOp::max);
    const double allreduce_s = comm.allreduce_value(sync ? stats.allreduce_seconds : 0.0, dist::ReduceOp::max);
    if (step < s.warmup) continue;
    series.step.push_back(step_s);
    series.forward.push_back(forward_s);
    series.backward.push_back(backward_s);
    series.optimizer.push_back(optimizer_s);
    series.exposed.push_back(exposed_s);
    series.allreduce.push_back(allreduce_s);
  }
  if (comm.is_main_process()) {
    const double samples = static_cast<double>(bench::benchmark_batch(s.model) * comm.world_size());
    nlohmann::json result{{"impl", "hpctrain"},          {"model", s.model},
                          {"ranks", comm.world_size()},  {"threads", s.threads},
                          {"overlap", acc.reducer().overlap()}, {"steps", s.steps}};
    if (!synced.step.empty()) result["on"] = summary(synced, samples);
    if (!unsynced.step.empty()) result["off"] = summary(unsynced, samples);
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
