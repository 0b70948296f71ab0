// The units --zero-stage 3 shards a model by (Note [Unit gathers] in src/train/parallel/fully_sharded.cpp), for the
// arithmetic that models it (estimate-memory, bench predict): the embeddings, each transformer layer, the head and
// the rest, each with its parameters' shapes.
#pragma once

#include <string>
#include <vector>

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/train/memory_estimate.hpp"

namespace hpctrain::train::parallel {

struct UnitShapes {
  std::string name;  // "embeddings", "transformer layer 3", "head", "rest"
  ParameterShapes parameters;
  bool kept = false;  // gathered once per micro-batch, kept to the end of backward (a tied head's embeddings)
};

// The units of the model from_config(config) builds (it is built, then freed), in forward order, those with
// parameters only; every parameter in one. Error naming the architecture for a model without units (vision models).
[[nodiscard]] std::vector<UnitShapes> zero3_unit_shapes(const io::HfConfig& config);

}  // namespace hpctrain::train::parallel
