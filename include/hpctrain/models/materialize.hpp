// Building a model without the memory of its parameters, and giving it to them later, part by part (Note
// [Deferred materialization] in src/models/materialize.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/models/model.hpp"

namespace hpctrain::models {

// While alive on this thread, defer_parameters() releases the memory of the parameters it is given, and the
// init_weights() a model constructor runs passes over them.
class DeferredParameters {
 public:
  DeferredParameters();
  ~DeferredParameters();
  DeferredParameters(const DeferredParameters&) = delete;
  DeferredParameters& operator=(const DeferredParameters&) = delete;
};

// Model constructors call it on each part they built (the embeddings, a transformer layer, a head), so that a
// DeferredParameters scope never holds more than one part's memory. Nothing outside such a scope.
void defer_parameters(torch::nn::Module& module);

// Whether `tensor` is a deferred parameter: elements, but no memory yet.
[[nodiscard]] bool is_deferred(const at::Tensor& tensor);

// For init_weights code: whether to write `tensor` now (not a deferred parameter, or the one materialize() is
// initializing).
[[nodiscard]] bool initializes(const at::Tensor& tensor);

// A model built inside a DeferredParameters scope, told the seed its parameters will be initialized from
// (Model::deferred_seed). Deterministic: a parameter's values are a function of the seed and its name alone.
void mark_deferred(Model& model, uint64_t seed);
// Allocates and initializes the deferred parameters among `names` (of model.named_parameters(); others are left
// as they are), each as model.init_weights() initializes it, drawing from a generator seeded by
// (model.deferred_seed(), its name).
void materialize(Model& model, const std::vector<std::string>& names);
// Every deferred parameter; the model is no longer deferred after it.
void materialize_all(Model& model);

// The model `hpctrain train --seed SEED` starts from (registry.hpp's build_model inside a DeferredParameters
// scope, then materialize_all): each parameter from (seed, its name), the same on any rank and at any ZeRO stage.
// `keep_deferred`: the parameters are left without memory for the caller to materialize (ZeRO-3's prepare_model).
[[nodiscard]] std::shared_ptr<Model> build_seeded_model(const io::HfConfig& config, uint64_t seed,
                                                        bool keep_deferred = false);

}  // namespace hpctrain::models
