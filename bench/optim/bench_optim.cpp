// Optimizer step time and state bytes on the parameters of a benchmark model (the peer is
// bench/optim/torch_optim.py; both are run by bench/optim/run.sh). The model is built from its config (the
// parameters' names and shapes, so weight-decay groups are Hugging Face's), every parameter gets a random
// gradient once, and each optimizer is built by make_optimizer from its --optim name (never by class) and
// stepped `steps` times after `warmup` steps; a step is Optimizer::step(lr) alone (no zero_grad, no
// forward/backward). Prints one JSON line per optimizer: {"impl","model","optim","threads","params",
// "steps","median_s","ns_per_param","state_bytes" (state_bytes()), "state_bytes_2d" (optimizer_state_bytes
// summed over the parameters with two or more dimensions: Adafactor's factored ones), "file_bytes" (the size
// of optimizer.safetensors written by save_optimizer_file into a temporary folder, removed after)}.
//
// Usage: bench_optim --model distilbert|distilbert-base [--optim NAME[,NAME...]] [--threads N=1] [--steps S=10]
//                    [--warmup W=2]
#include "../models/benchmark_models.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/threads.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct BenchOptions {
  std::string model = "distilbert";
  std::vector<std::string> optims{"adamw_torch", "adamw_bnb_8bit", "adafactor", "sgd"};
  int threads = 1, steps = 10, warmup = 2;
};

std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> names;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) names.push_back(name);
  return names;
}

// Exits with status 2 and a usage line on a bad option.
BenchOptions parse(int argc, char** argv) {
  BenchOptions options;
  for (int i = 1; i < argc; i += 2) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--model") options.model = value;
    else if (arg == "--optim") options.optims = split_names(value);
    else if (arg == "--threads") options.threads = std::stoi(value);
    else if (arg == "--steps") options.steps = std::stoi(value);
    else if (arg == "--warmup") options.warmup = std::stoi(value);
    else options.steps = 0;
    if (i + 1 >= argc) options.steps = 0;
  }
  if (options.steps < 1 || options.warmup < 0 || options.threads < 1 || options.optims.empty()) {
    std::cerr << "bench_optim: usage: --model distilbert|distilbert-base [--optim NAME[,NAME...]] [--threads N>=1] "
                 "[--steps S>=1] [--warmup W>=0]\n";
    std::exit(2);
  }
  return options;
}

// Median seconds of optimizer->step over `steps` timed steps after `warmup` untimed ones.
double time_steps(hpctrain::optim::Optimizer& optimizer, int warmup, int steps) {
  std::vector<double> times;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    optimizer.step(1e-4);
    const auto stop = std::chrono::steady_clock::now();
    if (step >= warmup) times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  return hpctrain::bench::median(times);
}

// Bytes of state `options` keeps for the parameters of two or more dimensions.
int64_t state_bytes_2d(const hpctrain::optim::OptimizerOptions& options,
                       const hpctrain::optim::NamedParameters& named) {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : named)
    if (tensor.dim() >= 2) bytes += hpctrain::optim::optimizer_state_bytes(options, tensor.sizes().vec());
  return bytes;
}

// The size of the optimizer's checkpoint file, written into a fresh temporary folder that is removed.
int64_t file_bytes(const hpctrain::optim::Optimizer& optimizer) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("bench_optim." + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  hpctrain::optim::save_optimizer_file(folder / "optimizer.safetensors", optimizer);
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(folder / "optimizer.safetensors"));
  std::filesystem::remove_all(folder);
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  const BenchOptions options = parse(argc, argv);
  if (options.model == "cnn") {
    std::cerr << "bench_optim: --model must be distilbert or distilbert-base\n";
    return 2;
  }
  hpctrain::core::tune_host_allocator();  // as the CLI does (Note [Host allocator])
  hpctrain::train::set_threads(options.threads);
  torch::manual_seed(0);
  const auto config = hpctrain::io::HfConfig::from_json(hpctrain::bench::benchmark_config(options.model), "bench_optim");
  const auto model = hpctrain::models::from_config(config);
  const hpctrain::optim::NamedParameters named = model->named_parameters().pairs();
  int64_t params = 0;
  {
    const at::NoGradGuard no_grad;
    for (const auto& [name, tensor] : named) {
      tensor.mutable_grad() = at::randn_like(tensor) * 1e-2;
      params += tensor.numel();
    }
  }
  for (const std::string& optim : options.optims) {
    hpctrain::optim::OptimizerOptions optimizer_options;
    optimizer_options.optim = optim;
    optimizer_options.weight_decay = 0.01;
    optimizer_options.sgd_momentum = 0.9;  // the common SGD (a momentum buffer), as the peer's
    hpctrain::optim::validate_optimizer_options(optimizer_options);
    const auto optimizer = hpctrain::optim::make_optimizer(optimizer_options, named,
                                                                 hpctrain::models::no_weight_decay_parameters(*model));
    const double median = time_steps(*optimizer, options.warmup, options.steps);
    const nlohmann::json result{{"impl", "hpctrain"},         {"model", options.model},
                                {"optim", optimizer->type()}, {"threads", options.threads},
                                {"params", params},           {"steps", options.steps},
                                {"median_s", median},         {"ns_per_param", median * 1e9 / static_cast<double>(params)},
                                {"state_bytes", optimizer->state_bytes()},
                                {"state_bytes_2d", state_bytes_2d(optimizer_options, named)},
                                {"file_bytes", file_bytes(*optimizer)}};
    std::cout << result.dump() << std::endl;
  }
  return 0;
}
