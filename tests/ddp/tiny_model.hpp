// A tiny model made of ATen ops for the reducer tests (unit and mpirun): two dense layers, a weight
// used twice in one forward (shared), a float64 bias (a second reduction dtype), and a parameter the
// forward may skip (an unused parameter).
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "hpctrain/ddp/named_tensors.hpp"

namespace tiny {

using hpctrain::ddp::NamedTensors;

inline at::Tensor make_param(at::IntArrayRef shape, at::ScalarType dtype = at::kFloat) {
  return (at::randn(shape, at::TensorOptions().dtype(at::kDouble)) * 0.5).to(dtype).set_requires_grad(true);
}

struct Model {
  NamedTensors params;  // registration order

  static Model make(uint64_t seed) {
    at::manual_seed(seed);
    Model model;
    model.params = {{"layer1.weight", make_param({16, 4})},  {"layer1.bias", make_param({16})},
                    {"layer2.weight", make_param({16, 16})}, {"optional.scale", make_param({16})},
                    {"head.weight", make_param({3, 16})},    {"head.bias", make_param({3}, at::kDouble)}};
    return model;
  }

  const at::Tensor& get(const std::string& name) const {
    for (const auto& [param_name, tensor] : params) {
      if (param_name == name) return tensor;
    }
    throw std::runtime_error("no parameter " + name);
  }

  // Detached copies that require grad: a replica for computing expected gradients without hooks.
  Model clone() const {
    Model copy;
    for (const auto& [name, tensor] : params) copy.params.emplace_back(name, tensor.detach().clone().set_requires_grad(true));
    return copy;
  }

  at::Tensor loss(const at::Tensor& x, bool use_optional = true) const {
    at::Tensor h = at::tanh(at::matmul(x, get("layer1.weight").t()) + get("layer1.bias"));
    h = at::tanh(at::matmul(h, get("layer2.weight").t()));
    if (use_optional) h = h * get("optional.scale");
    h = at::tanh(at::matmul(h, get("layer2.weight").t()));  // the shared weight's second use
    const at::Tensor out = at::matmul(h, get("head.weight").t()) + get("head.bias").to(at::kFloat);
    return (out * out).mean() + out.sum() * 0.1;
  }

  void zero_grads() {
    for (auto& [name, tensor] : params) tensor.mutable_grad() = at::Tensor();
  }

  // Gradients as float64 (zeros where undefined), for comparisons.
  std::vector<at::Tensor> grads() const {
    std::vector<at::Tensor> out;
    for (const auto& [name, tensor] : params) {
      out.push_back(tensor.grad().defined() ? tensor.grad().to(at::kDouble)
                                            : at::zeros(tensor.sizes(), at::TensorOptions().dtype(at::kDouble)));
    }
    return out;
  }
};

// A deterministic input batch for (rank, micro_batch), the same in every process.
inline at::Tensor input_for(int rank, int micro_batch = 0) {
  at::manual_seed(1000 + 17 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(micro_batch));
  return at::randn({5, 4});
}

// Gradients of a hook-free replica after one backward per input (accumulated), as float64.
inline std::vector<at::Tensor> replica_grads(const Model& model, const std::vector<at::Tensor>& inputs,
                                             bool use_optional = true) {
  Model replica = model.clone();
  for (const at::Tensor& x : inputs) replica.loss(x, use_optional).backward();
  return replica.grads();
}

// Largest absolute difference over all tensors.
inline double max_difference(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, (a[i] - b[i]).abs().max().item<double>());
  return worst;
}

inline std::vector<at::Tensor> add(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  std::vector<at::Tensor> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(a[i] + b[i]);
  return out;
}

inline std::vector<at::Tensor> scale(const std::vector<at::Tensor>& a, double factor) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : a) out.push_back(t * factor);
  return out;
}

}  // namespace tiny
