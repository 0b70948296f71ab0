// Data-parallel training step throughput of hpctrain (the peer is bench/ddp/torch_ddp.py, PyTorch DDP on
// gloo; both are run by bench/ddp/run.sh). A step: zero grads, forward on this rank's random batch,
// Accelerator::backward (gradients averaged over ranks: fused buckets, overlapped with backward unless
// --overlap off), AdamW step. With --sync off gradients are never exchanged (DDP's no_sync()): the compute-
// only step time, from which run.sh derives the exposed-communication share the same way for both sides.
// Rank 0 prints one JSON line: {"impl","model","ranks","threads","sync","median_s","samples_per_s",...}.
//
//   mpirun -np N bench_train --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
//                            [--overlap on|off] [--sync on|off]
#include "../models/benchmark_models.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/adamw.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

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
  bool sync = true;
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
    else if (arg == "--sync") s.sync = on_off(arg, value);
    else {
      std::cerr << "bench_train: unknown option " << arg << "\n";
      std::exit(2);
    }
  }
  if (s.steps < 1 || s.warmup < 0 || s.threads < 1) {
    std::cerr << "bench_train: need --steps >= 1, --warmup >= 0, --threads >= 1\n";
    std::exit(2);
  }
  return s;
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
  acc.set_gradient_sync(s.sync);
  model->train();
  torch::manual_seed(1 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const models::ModelInputs inputs = bench::benchmark_inputs(s.model);

  std::vector<double> step_seconds, exposed_seconds, allreduce_seconds, forward_seconds, backward_seconds,
      optimizer_seconds;
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  acc.wait_for_everyone();
  for (int step = 0; step < s.warmup + s.steps; ++step) {
    const auto start = Clock::now();
    acc.zero_grad();
    const models::ModelOutput out = model->forward(inputs);
    const auto forward_done = Clock::now();
    acc.backward(out.loss);
    const auto backward_done = Clock::now();
    optimizer.step(1e-4);
    const auto stop = Clock::now();
    if (step < s.warmup) continue;
    step_seconds.push_back(seconds(start, stop));
    forward_seconds.push_back(seconds(start, forward_done));
    backward_seconds.push_back(seconds(forward_done, backward_done));
    optimizer_seconds.push_back(seconds(backward_done, stop));
    const ddp::ReducerStats& stats = acc.reducer().last_step_stats();
    exposed_seconds.push_back(s.sync ? stats.exposed_seconds : 0.0);
    allreduce_seconds.push_back(s.sync ? stats.allreduce_seconds : 0.0);
  }
  // The job's step time is its slowest rank's.
  const double local_median = bench::median(step_seconds);
  const double step_median = comm.allreduce_value(local_median, dist::ReduceOp::max);
  const double exposed = comm.allreduce_value(bench::median(exposed_seconds), dist::ReduceOp::max);
  const double allreduce = comm.allreduce_value(bench::median(allreduce_seconds), dist::ReduceOp::max);
  auto slowest = [&](const std::vector<double>& values) {
    return comm.allreduce_value(bench::median(values), dist::ReduceOp::max);
  };
  const double forward = slowest(forward_seconds), backward = slowest(backward_seconds),
               optimizer_step = slowest(optimizer_seconds);
  if (comm.is_main_process()) {
    const double samples = static_cast<double>(bench::benchmark_batch(s.model) * comm.world_size());
    const nlohmann::json result{{"impl", "hpctrain"},
                                {"model", s.model},
                                {"ranks", comm.world_size()},
                                {"threads", s.threads},
                                {"sync", s.sync},
                                {"overlap", acc.reducer().overlap()},
                                {"steps", s.steps},
                                {"median_s", step_median},
                                {"samples_per_s", samples / step_median},
                                {"reducer_exposed_s", exposed},
                                {"reducer_allreduce_s", allreduce},
                                {"forward_s", forward},
                                {"backward_s", backward},
                                {"optimizer_s", optimizer_step}};
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
