// bitsandbytes' dynamic 8-bit quantization map (functional.create_dynamic_map), value for value: the map of the
// 8-bit optimizers' state (optim/blockwise_quant.hpp) and of QLoRA's nested absmax (models/nf4.hpp).
#pragma once

#include <array>

namespace hpctrain::core {

// create_dynamic_map(signed, max_exponent_bits=7, total_bits=8), sorted ascending: signed in [-0.993, 1], unsigned
// in [0, 1].
[[nodiscard]] std::array<float, 256> dynamic_map(bool is_signed);

}  // namespace hpctrain::core
