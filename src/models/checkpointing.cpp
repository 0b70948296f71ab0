// Layer checkpointing (checkpointing.hpp): a torch::autograd::Function whose forward runs the layer
// without recording and whose backward recomputes it and back-propagates through the recomputation.
#include "hpctrain/models/checkpointing.hpp"

#include "hpctrain/compat/autocast_state.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace hpctrain::models {

// Note [Layer checkpointing]
// CheckpointedLayer::forward runs the layer with grad mode off (autograd::Function does that), so
// nothing of the layer's intermediate tensors is kept: only its input and its LayerContext's tensors
// (Note [Layer context]; they never need grad, so they are kept as saved data, undefined ones as None) are
// saved, plus the generator states and the autocast state at the start. backward() restores those, runs the
// layer again with grad mode on from a detached copy of the input, and calls autograd's backward on
// the recomputed output (reentrant, as torch.utils.checkpoint's use_reentrant=True). That inner
// backward accumulates the parameters' gradients through their own AccumulateGrad nodes, so tensor
// hooks fire exactly once per parameter, during the recompute's backward: the gradient reducer's
// overlap and no-sync accumulation (Note [Bucket order] in src/ddp/gradient_reducer.cpp) see the
// same gradients as without checkpointing, and autograd::grad (whose treatment of leaf hooks differs
// between LibTorch 1.13 and 2.x) is never used. Dropout masks are counter-based functions of seeds
// drawn from the default generator (Note [Counter-based dropout]); restoring the generator state
// before the recomputation draws the same seeds, so the recomputed layer is the same function. After
// the recomputation the generator is put back as it was, so later draws do not change either.
// The layer and the rest of the layer runner chain (Note [Layer runner chain] in model.hpp) are referenced by
// address (not owned): a model outlives the backward of its own forward, and its links do not change meanwhile.
// The recomputation runs the rest of the chain, not just the layer: a link inside checkpointing runs again.

namespace {

// The default generators of the CPU and of the device the hidden states live on, saved and restored.
struct GeneratorStates {
  at::Tensor cpu;
  at::Tensor device;  // undefined for CPU tensors
  c10::Device where{at::kCPU};

  static GeneratorStates capture(const c10::Device& device) {
    GeneratorStates s;
    s.cpu = state_of(at::kCPU);
    s.where = device;
    if (!device.is_cpu()) s.device = state_of(device);
    return s;
  }
  void restore() const {
    set(at::kCPU, cpu);
    if (device.defined()) set(where, device);
  }

 private:
  static at::Tensor state_of(const c10::Device& device) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
  }
  static void set(const c10::Device& device, const at::Tensor& state) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
};

// Autocast state as IValues in the context (int64 dtype codes), and back.
void save_autocast(torch::autograd::AutogradContext* ctx, const compat::AutocastState& a) {
  ctx->saved_data["autocast_cpu"] = a.cpu_enabled;
  ctx->saved_data["autocast_cuda"] = a.cuda_enabled;
  ctx->saved_data["autocast_cpu_dtype"] = static_cast<int64_t>(a.cpu_dtype);
  ctx->saved_data["autocast_cuda_dtype"] = static_cast<int64_t>(a.cuda_dtype);
  ctx->saved_data["autocast_cache"] = a.cache_enabled;
}

compat::AutocastState saved_autocast(torch::autograd::AutogradContext* ctx) {
  compat::AutocastState a;
  a.cpu_enabled = ctx->saved_data["autocast_cpu"].toBool();
  a.cuda_enabled = ctx->saved_data["autocast_cuda"].toBool();
  a.cpu_dtype = static_cast<at::ScalarType>(ctx->saved_data["autocast_cpu_dtype"].toInt());
  a.cuda_dtype = static_cast<at::ScalarType>(ctx->saved_data["autocast_cuda_dtype"].toInt());
  a.cache_enabled = ctx->saved_data["autocast_cache"].toBool();
  return a;
}

// The context's tensors as IValues in the context (None for an undefined tensor), and back.
void save_layer_context(torch::autograd::AutogradContext* ctx, const LayerContext& context) {
  const std::vector<at::Tensor> tensors = context.tensors();
  ctx->saved_data["context_size"] = static_cast<int64_t>(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    ctx->saved_data["context_" + std::to_string(i)] = tensors[i].defined() ? c10::IValue(tensors[i]) : c10::IValue();
  }
}

LayerContext saved_layer_context(torch::autograd::AutogradContext* ctx) {
  std::vector<at::Tensor> tensors(static_cast<size_t>(ctx->saved_data["context_size"].toInt()));
  for (size_t i = 0; i < tensors.size(); ++i) {
    const c10::IValue& value = ctx->saved_data["context_" + std::to_string(i)];
    if (!value.isNone()) tensors[i] = value.toTensor();
  }
  return LayerContext::from_tensors(tensors);
}

class CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
 public:
  // `context` is not an autograd input (none of its tensors needs grad): apply() passes it through as it is.
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& hidden,
                            const LayerContext& context, TransformerLayer* layer, const LayerRunner* next) {
    const GeneratorStates generators = GeneratorStates::capture(hidden.device());
    ctx->save_for_backward({hidden});
    save_layer_context(ctx, context);
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);  // not owned: see Note [Layer checkpointing]
    ctx->saved_data["next"] = reinterpret_cast<int64_t>(next);    // the rest of the chain (Note [Layer runner chain])
    ctx->saved_data["cpu_generator"] = generators.cpu;
    ctx->saved_data["device_generator"] = generators.device;
    save_autocast(ctx, compat::AutocastState::current());
    return (*next)(*layer, hidden, context);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto* layer = reinterpret_cast<TransformerLayer*>(ctx->saved_data["layer"].toInt());
    const auto* next = reinterpret_cast<const LayerRunner*>(ctx->saved_data["next"].toInt());
    const auto saved = ctx->get_saved_variables();
    const at::Tensor input = saved[0].detach().requires_grad_(true);
    GeneratorStates generators;
    generators.cpu = ctx->saved_data["cpu_generator"].toTensor();
    generators.device = ctx->saved_data["device_generator"].toTensor();
    generators.where = input.device();
    at::Tensor output;
    {
      const GeneratorStates now = GeneratorStates::capture(input.device());
      generators.restore();
      compat::AutocastStateGuard same_autocast(saved_autocast(ctx));
      at::AutoGradMode grad_on(true);
      output = (*next)(*layer, input, saved_layer_context(ctx));
      now.restore();
    }
    torch::autograd::backward({output}, {grad_outputs[0]});
    return {input.grad(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

LayerLink checkpointing_layer_link() {
  return [](TransformerLayer& layer, const at::Tensor& hidden, const LayerContext& context, const LayerRunner& next) {
    if (!at::GradMode::is_enabled()) return next(layer, hidden, context);
    // A frozen embedding (Note [LoRA]) gives an input without grad, and a Function whose inputs need none records
    // nothing: when the layer itself trains, a detached input that requires grad stands in for it (transformers'
    // enable_input_require_grads), so this layer is checkpointed too. Nothing before it trains, so nothing is cut.
    const bool layer_trains = hidden.requires_grad() || [&] {
      for (const auto& param : layer.parameters()) if (param.requires_grad()) return true;
      return false;
    }();
    if (!layer_trains) return next(layer, hidden, context);
    const at::Tensor input = hidden.requires_grad() ? hidden : hidden.detach().requires_grad_(true);
    return CheckpointedLayer::apply(input, context, &layer, &next);
  };
}

void set_gradient_checkpointing(Model& model, bool enabled) {
  model.set_layer_link(LayerLinkPlace::checkpointing, enabled ? checkpointing_layer_link() : LayerLink());
}

}  // namespace hpctrain::models
