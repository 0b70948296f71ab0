// Gradient checkpointing of transformer layers, as Transformers' gradient_checkpointing_enable(): in
// training, each layer keeps only its input (and its LayerContext) and runs its forward again during backward,
// trading one extra forward per layer for the layer's activations (Note [Layer checkpointing]).
#pragma once

#include "hpctrain/models/model.hpp"

namespace hpctrain::models {

// A LayerRunner that checkpoints every layer it runs while autograd records (grad mode on and the
// hidden states requiring grad); otherwise (evaluation, no_grad) it calls layer.forward directly.
// The recomputation redraws the same dropout masks (restored generator states), under the same
// autocast state, so gradients equal those of the plain forward.
[[nodiscard]] LayerRunner checkpointing_layer_runner();

// Installs checkpointing_layer_runner() on `model` (enabled) or the plain runner (not enabled).
void set_gradient_checkpointing(Model& model, bool enabled);

}  // namespace hpctrain::models
