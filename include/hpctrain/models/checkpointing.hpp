// Gradient checkpointing of transformer layers, as Transformers' gradient_checkpointing_enable(): in
// training, each layer keeps only its input (and its LayerContext) and runs its forward again during backward,
// trading one extra forward per layer for the layer's activations (Note [Layer checkpointing]).
#pragma once

#include "hpctrain/models/model.hpp"

namespace hpctrain::models {

// A layer link (Note [Layer runner chain] in model.hpp) that checkpoints every layer it runs while autograd
// records (grad mode on and the hidden states requiring grad); otherwise (evaluation, no_grad) it calls the rest
// of the chain directly. The recomputation redraws the same dropout masks (restored generator states), under
// the same autocast state, so gradients equal those of the plain forward.
[[nodiscard]] LayerLink checkpointing_layer_link();

// Installs checkpointing_layer_link() on `model` at LayerLinkPlace::checkpointing (enabled), or removes it.
void set_gradient_checkpointing(Model& model, bool enabled);

}  // namespace hpctrain::models
