// Private to src/train: the units --zero-stage 3 gathers a model's parameters by (Note [Unit gathers] in
// fully_sharded.cpp): which unit owns each parameter and which units each hook gathers.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

#include "hpctrain/ddp/sharded_parameters.hpp"
#include "hpctrain/models/model.hpp"

namespace hpctrain::train::parallel {

inline constexpr std::size_t kNoUnit = static_cast<std::size_t>(-1);

struct UnitMap {
  // embeddings, the transformer layers, the head, the rest (the parameters of no unit hook): those with
  // parameters, in forward order; each parameter in exactly one, in the model's order
  std::vector<ddp::ShardedParameters::Unit> units;
  std::unordered_map<const void*, std::size_t> layer_unit;  // TransformerLayer* -> unit
  std::vector<std::size_t> embeddings, head;                // the units each hook gathers (a tied head: the embeddings')
  std::size_t rest = kNoUnit;
  std::vector<std::size_t> kept;  // the units both hooks gather (a tied head's: the embeddings'), Note [Unit gathers]
  std::vector<std::size_t> backward_order;  // units in the order backward completes their gradients
};

// Error naming the architecture and --zero-stage 2 when the model has no layers, embeddings or head to shard by.
[[nodiscard]] UnitMap plan_units(models::Model& model);

}  // namespace hpctrain::train::parallel
