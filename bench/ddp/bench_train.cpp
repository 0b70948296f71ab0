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
// "on": {"median_s","mean_s","samples_per_s",...}, "off": {...}, "memory": {...}} with "on"/"off" present
// when measured.
//
// The techniques of bench/efficient/run.sh, through the Accelerator as a user's loop sets them: bf16
// autocast, gradient checkpointing, accumulation (a step is N micro-batches, Accelerator::accumulate(), the
// loss divided by N) and Local SGD (local_sgd_step() after every optimizer step, inside the timed step: mean_s
// carries the every-K-th parameter average, the median does not). Memory (after the timed steps, one more
// step): "peak_rss_bytes" (VmHWM, the largest rank's), "activation_peak_bytes" and "activation_kept_bytes":
// the bytes LibTorch's CPU allocator handed out above the level before forward, at their peak during forward
// and backward and still held when forward returned (the largest rank's; a counting allocator, the one
// tests/models uses; memory oneDNN takes outside LibTorch's allocator is not counted).
//
//   mpirun -np N bench_train --model distilbert|cnn [--threads T=1] [--steps S=10] [--warmup W=2]
//                            [--overlap on|off] [--sync alternate|on|off] [--mixed-precision no|bf16]
//                            [--gradient-checkpointing on|off] [--accumulation N=1] [--local-sgd-steps K=0]
//                            [--seq-length L=128] [--batch B=16] [--grad-reduce-dtype fp32|bf16]
//   (S steps of each measured kind, after W warm-up steps; a step of N micro-batches of B sequences of L tokens;
//   --seq-length and --batch apply to the DistilBERT models.)
#include "../../tests/models/counting_allocator.hpp"
#include "../models/benchmark_models.hpp"
#include "hpctrain/core/blas_kernels.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/optim/optimizer.hpp"

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
  std::string mixed_precision = "no";  // no | bf16 (Accelerator autocast)
  std::string grad_reduce_dtype = "fp32";  // fp32 | bf16: the dtype gradients travel in
  bool gradient_checkpointing = false;
  int accumulation = 1;      // micro-batches per step
  int local_sgd_steps = 0;   // K > 0: Local SGD
  int seq_length = 128;      // tokens per sequence (DistilBERT models)
  int batch = 0;             // sequences per micro-batch; 0 = bench::benchmark_batch(model)
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
    else if (arg == "--mixed-precision") s.mixed_precision = value;
    else if (arg == "--grad-reduce-dtype") s.grad_reduce_dtype = value;
    else if (arg == "--gradient-checkpointing") s.gradient_checkpointing = on_off(arg, value);
    else if (arg == "--accumulation") s.accumulation = std::stoi(value);
    else if (arg == "--local-sgd-steps") s.local_sgd_steps = std::stoi(value);
    else if (arg == "--seq-length") s.seq_length = std::stoi(value);
    else if (arg == "--batch") s.batch = std::stoi(value);
    else {
      std::cerr << "bench_train: unknown option " << arg << "\n";
      std::exit(2);
    }
  }
  if (s.steps < 1 || s.warmup < 0 || s.threads < 1 || (s.sync != "alternate" && s.sync != "on" && s.sync != "off") ||
      s.accumulation < 1 || s.local_sgd_steps < 0 || s.seq_length < 1 || s.batch < 0) {
    std::cerr << "bench_train: need --steps >= 1, --warmup >= 0, --threads >= 1, --sync alternate|on|off, "
                 "--accumulation >= 1, --local-sgd-steps >= 0, --seq-length >= 1, --batch >= 0\n";
    std::exit(2);
  }
  if (s.batch == 0) s.batch = static_cast<int>(bench::benchmark_batch(s.model));
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
  double total = 0;
  for (const double seconds : series[0]) total += seconds;
  out["mean_s"] = total / static_cast<double>(series[0].size());
  out["samples_per_s_mean"] = samples_per_step / out["mean_s"].get<double>();
  return out;
}

train::AcceleratorOptions accelerator_options(const Settings& s) {
  train::AcceleratorOptions options;
  options.threads = s.threads;
  options.overlap = s.overlap;
  options.mixed_precision = train::parse_mixed_precision(s.mixed_precision);
  options.grad_reduce_dtype = train::parse_grad_reduce_dtype(s.grad_reduce_dtype);
  options.gradient_checkpointing = s.gradient_checkpointing;
  options.gradient_accumulation_steps = s.accumulation;
  options.local_sgd_steps = s.local_sgd_steps;
  return options;
}

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What one step needs: the prepared model, its optimizer and this rank's micro-batch.
struct Job {
  train::Accelerator& acc;
  models::SequenceClassifier& model;
  optim::Optimizer& optimizer;
  const models::ModelInputs& inputs;
  int accumulation = 1;
};

// One micro-batch's forward under the Accelerator's autocast; the loss divided by the micro-batches per step.
at::Tensor forward_loss(const Job& job) {
  const train::AutocastRegion region = job.acc.autocast();
  return job.model.forward(job.inputs).loss / job.accumulation;
}

// One step (figures in kFigures' order, this rank's): `sync` steps accumulate() their micro-batches (the last
// one reduces gradients), others run every micro-batch with gradient sync off.
std::array<double, kFigures.size()> timed_step(const Job& job, bool sync) {
  const auto start = Clock::now();
  job.acc.zero_grad();
  double forward = 0, backward = 0;
  for (int micro = 0; micro < job.accumulation; ++micro) {
    if (sync) (void)job.acc.accumulate();
    else job.acc.set_gradient_sync(false);
    const auto micro_start = Clock::now();
    const at::Tensor loss = forward_loss(job);
    const auto forward_done = Clock::now();
    job.acc.backward(loss);
    forward += seconds(micro_start, forward_done);
    backward += seconds(forward_done, Clock::now());
  }
  const auto backward_done = Clock::now();
  job.optimizer.step(1e-4);
  (void)job.acc.local_sgd_step();
  const auto stop = Clock::now();
  const ddp::ReducerStats& stats = job.acc.reducer().last_step_stats();
  return {seconds(start, stop), forward, backward, seconds(backward_done, stop),
          sync ? stats.exposed_seconds : 0.0, sync ? stats.allreduce_seconds : 0.0};
}

// One more synced micro-batch (forward and backward, gradients reduced) counted by the allocator; then the
// peak resident set. Figures are the largest rank's.
nlohmann::json memory_step(const Job& job, dist::Comm& comm) {
  job.acc.zero_grad();
  job.acc.set_gradient_sync(true);
  std::array<double, 3> bytes{};
  {
    models::testing::CountingScope counting;
    const at::Tensor loss = forward_loss(job);
    bytes[1] = static_cast<double>(counting.live());
    job.acc.backward(loss);
    bytes[0] = static_cast<double>(counting.peak());
  }
  bytes[2] = static_cast<double>(core::peak_resident_bytes().value_or(0));
  comm.allreduce(bytes.data(), bytes.size(), dist::ReduceOp::max);
  return {{"activation_peak_bytes", bytes[0]}, {"activation_kept_bytes", bytes[1]}, {"peak_rss_bytes", bytes[2]}};
}

nlohmann::json describe(const Settings& s, train::Accelerator& acc) {
  return {{"impl", "hpctrain"},
          {"model", s.model},
          {"ranks", acc.world_size()},
          {"threads", s.threads},
          {"overlap", acc.reducer().overlap()},
          {"steps", s.steps},
          {"mixed_precision", s.mixed_precision},
          {"grad_reduce_dtype", s.grad_reduce_dtype},
          {"bytes_reduced_per_step", acc.reducer().last_step_stats().bytes_reduced},
          {"gradient_checkpointing", s.gradient_checkpointing},
          {"accumulation", s.accumulation},
          {"local_sgd_steps", s.local_sgd_steps},
          {"seq_length", s.seq_length},
          {"batch", s.batch}};
}

int run(dist::Comm& comm, const Settings& s) {
  train::Accelerator acc(comm, accelerator_options(s));
  torch::manual_seed(0);
  const auto model = models::from_config(io::HfConfig::from_json(bench::benchmark_config(s.model), "bench_train"));
  acc.prepare_model(*model);
  const auto optimizer = optim::make_optimizer(optim::OptimizerOptions{}, model->named_parameters().pairs(),
                                               models::no_weight_decay_parameters(*model));  // AdamW
  model->train();
  torch::manual_seed(1 + static_cast<uint64_t>(comm.rank()));  // each rank its own batch
  const models::ModelInputs inputs = bench::benchmark_inputs(s.model, s.batch, s.seq_length);
  const Job job{acc, *model, *optimizer, inputs, s.accumulation};

  Series synced, unsynced;
  const int measured = s.sync == "alternate" ? 2 * s.steps : s.steps;
  for (int step = 0; step < s.warmup + measured; ++step) {
    const bool sync = s.sync == "alternate" ? step % 2 == 0 : s.sync == "on";
    acc.wait_for_everyone();
    std::array<double, kFigures.size()> figures = timed_step(job, sync);
    // Reduced after the clock stopped: the figures are the job's, i.e. the slowest rank's.
    comm.allreduce(figures.data(), figures.size(), dist::ReduceOp::max);
    if (step < s.warmup) continue;
    Series& series = sync ? synced : unsynced;
    for (std::size_t i = 0; i < figures.size(); ++i) series[i].push_back(figures[i]);
  }
  nlohmann::json result = describe(s, acc);
  result["memory"] = memory_step(job, comm);
  if (comm.is_main_process()) {
    const double samples = static_cast<double>(s.batch) * s.accumulation * comm.world_size();
    if (!synced[0].empty()) result["on"] = summary(synced, samples);
    if (!unsynced[0].empty()) result["off"] = summary(unsynced, samples);
    std::cout << result.dump() << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::core::fix_blas_kernels(argv);  // as the CLI does (Note [BLAS kernels]): before MPI and LibTorch threads
  dist::MpiRuntime runtime(&argc, &argv);
  const Settings settings = parse(argc, argv);
  try {
    return run(runtime.world(), settings);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] bench_train: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);
  }
}
