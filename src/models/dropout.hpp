// Private to src/models: dropout with a counter-based mask (Note [Counter-based dropout]).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace hpctrain::models::detail {

// A seed for one dropout call, drawn from LibTorch's default CPU generator (so torch::manual_seed and a
// restored generator state reproduce the masks).
[[nodiscard]] uint64_t draw_dropout_seed();

// In place: x <- x * keep / (1 - p) with keep ~ Bernoulli(1 - p), p resolved to 1/65536. Element i of
// the contiguous CPU tensor `x` uses bits of SplitMix64(seed) output i / 4 only, so the mask depends on
// (seed, element index) alone: recomputing it is exact and any thread split gives the same mask.
void apply_dropout_mask(at::Tensor& x, double p, uint64_t seed);

// at::dropout(x, p, training) for activations, without keeping a mask for backward: backward redraws it
// from the saved seed. Autograd-aware; returns x itself when not training or p == 0. Tensors on a device
// (CUDA) use at::dropout: its kernel and the device generator are the fast path there.
[[nodiscard]] at::Tensor seeded_dropout(const at::Tensor& x, double p, bool training);

}  // namespace hpctrain::models::detail
