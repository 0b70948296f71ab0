// Forward + backward step time of hpctrain's models (the peer is bench/models/torch_models.py; both are run by
// bench/models/run.sh). A step: zero grads, forward with random input_ids/labels (or pixels/labels), loss =
// cross-entropy (the model's own single-label loss), loss.backward(). No optimizer. Train mode (dropout on, HF
// defaults). Prints one JSON line: {"impl","model","threads","steps","median_s","samples_per_s"}.
//
// Usage: bench_models --model distilbert|cnn [--threads N=1] [--steps S=20] [--warmup W=3]
#include "benchmark_models.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/threads.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::string model_name = "distilbert";
  int threads = 1;
  int steps = 20;
  int warmup = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "bench_models: " << arg << " needs a value\n";
      return 2;
    }
    const std::string value = argv[++i];
    if (arg == "--model") model_name = value;
    else if (arg == "--threads") threads = std::stoi(value);
    else if (arg == "--steps") steps = std::stoi(value);
    else if (arg == "--warmup") warmup = std::stoi(value);
    else {
      std::cerr << "bench_models: unknown option " << arg
                << " (usage: --model distilbert|cnn --threads N --steps S --warmup W)\n";
      return 2;
    }
  }
  if (steps < 1 || warmup < 0 || threads < 1) {
    std::cerr << "bench_models: need --steps >= 1, --warmup >= 0, --threads >= 1\n";
    return 2;
  }

  hpctrain::core::tune_host_allocator();  // as the CLI does (Note [Host allocator])
  hpctrain::train::set_threads(threads);
  torch::manual_seed(0);
  const auto config = hpctrain::io::HfConfig::from_json(hpctrain::bench::benchmark_config(model_name), "bench_models");
  const auto model = hpctrain::models::from_config(config);
  model->train();
  const int64_t batch = hpctrain::bench::benchmark_batch(model_name);
  const hpctrain::models::ModelInputs inputs = hpctrain::bench::benchmark_inputs(model_name);

  std::vector<double> times;
  double loss_sum = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    model->zero_grad(/*set_to_none=*/true);
    const hpctrain::models::ModelOutput out = model->forward(inputs);
    out.loss.backward();
    const auto stop = std::chrono::steady_clock::now();
    loss_sum += out.loss.item<double>();
    if (step >= warmup) times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  const double median = hpctrain::bench::median(times);

  const nlohmann::json result{{"impl", "hpctrain"},      {"model", model_name},
                              {"threads", threads},      {"steps", steps},
                              {"median_s", median},      {"samples_per_s", static_cast<double>(batch) / median},
                              {"mean_loss", loss_sum / (warmup + steps)}};
  std::cout << result.dump() << std::endl;
  return 0;
}
