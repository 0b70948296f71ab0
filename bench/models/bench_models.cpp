// Forward + backward step time of hpctrain's models (the peer is bench/models/torch_models.py; both are run by
// bench/models/run.sh). A step: zero grads, forward with random input_ids/labels (or pixels/labels), loss =
// cross-entropy (the model's own single-label loss), loss.backward(). No optimizer. Train mode (dropout on, HF
// defaults). Prints one JSON line: {"impl","model","threads","device","mixed_precision","steps","median_s",
// "samples_per_s"}. --device cuda times after a device synchronize; --mixed-precision bf16 runs the forward (and
// the model's loss) in a LibTorch autocast region, as `hpctrain train --mixed-precision bf16` does.
//
// Usage: bench_models --model distilbert|distilbert-base|cnn [--threads N=1] [--steps S=20] [--warmup W=3]
//                     [--device cpu|cuda] [--mixed-precision no|bf16]
#include "benchmark_models.hpp"
#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/threads.hpp"

#include <ATen/ATen.h>
#include <torch/cuda.h>
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
  std::string device_name = "cpu";
  std::string mixed_precision = "no";
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
    else if (arg == "--device") device_name = value;
    else if (arg == "--mixed-precision") mixed_precision = value;
    else {
      std::cerr << "bench_models: unknown option " << arg
                << " (usage: --model distilbert|distilbert-base|cnn --threads N --steps S --warmup W --device cpu|cuda "
                   "--mixed-precision no|bf16)\n";
      return 2;
    }
  }
  if (steps < 1 || warmup < 0 || threads < 1 || (device_name != "cpu" && device_name != "cuda") ||
      (mixed_precision != "no" && mixed_precision != "bf16")) {
    std::cerr << "bench_models: need --steps >= 1, --warmup >= 0, --threads >= 1, --device cpu|cuda, "
                 "--mixed-precision no|bf16\n";
    return 2;
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::cerr << "bench_models: --device cuda: no CUDA device visible to this LibTorch\n";
    return 2;
  }
  const at::Device device(device_name == "cuda" ? at::kCUDA : at::kCPU);
  const auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };

  hpctrain::core::tune_host_allocator();  // as the CLI does (Note [Host allocator])
  hpctrain::train::set_threads(threads);
  torch::manual_seed(0);
  const auto config = hpctrain::io::HfConfig::from_json(hpctrain::bench::benchmark_config(model_name), "bench_models");
  const auto model = hpctrain::models::from_config(config);
  model->to(device);
  model->train();
  const int64_t batch = hpctrain::bench::benchmark_batch(model_name);
  hpctrain::models::ModelInputs inputs = hpctrain::bench::benchmark_inputs(model_name);
  for (at::Tensor* t : {&inputs.input_ids, &inputs.attention_mask, &inputs.pixel_values, &inputs.labels})
    if (t->defined()) *t = t->to(device);

  std::vector<double> times;
  double loss_sum = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    sync();
    const auto start = std::chrono::steady_clock::now();
    model->zero_grad(/*set_to_none=*/true);
    hpctrain::models::ModelOutput out;
    {
      const hpctrain::compat::AutocastScope autocast(device.type(), mixed_precision == "bf16");
      out = model->forward(inputs);
    }
    out.loss.backward();
    sync();
    const auto stop = std::chrono::steady_clock::now();
    loss_sum += out.loss.item<double>();
    if (step >= warmup) times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  const double median = hpctrain::bench::median(times);

  const nlohmann::json result{{"impl", "hpctrain"},      {"model", model_name},
                              {"threads", threads},      {"device", device_name},
                              {"mixed_precision", mixed_precision}, {"steps", steps},
                              {"median_s", median},      {"samples_per_s", static_cast<double>(batch) / median},
                              {"mean_loss", loss_sum / (warmup + steps)}};
  std::cout << result.dump() << std::endl;
  return 0;
}
