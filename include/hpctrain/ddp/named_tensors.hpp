// (name, tensor) pairs in registration order, e.g. a module's named_parameters() or named_buffers().
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace hpctrain::ddp {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

}  // namespace hpctrain::ddp
