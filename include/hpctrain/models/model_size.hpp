// A model's parameter count and memory computed from its config alone, before anything is allocated,
// and the check that refuses a config whose model cannot fit (Note [Size before building]).
//
// Note [Size before building]
// A config.json is input: `dim` 10^9 or `vocab_size` 10^12 would make LibTorch allocate until it fails
// or the machine swaps. from_config() first computes the parameter count per architecture (the same
// layers the model constructors register, overflow-checked in int64) and refuses a model whose fp32
// parameters exceed the memory this process may still allocate, naming the dominant fields. `train`
// checks again with what training holds (weights, gradients and the chosen optimizer's state: an upper
// bound from optimizer_state_bytes, optim/optimizer.hpp) before building. "May still allocate" counts every limit
// (core::available_host_memory: MemAvailable, the cgroup limits, RLIMIT_AS and RLIMIT_DATA); an allocation that
// fails anyway (the estimate leaves out LibTorch's per-tensor overhead) is an Error naming config.json and the limit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/io/hf_config.hpp"

namespace hpctrain::models {

// One group of parameters and the config fields that size it.
struct SizeTerm {
  std::string fields;      // e.g. "vocab_size 30522 x dim 768"
  int64_t parameters = 0;  // elements
};

struct ModelSize {
  int64_t parameters = 0;       // elements, as numel() over named_parameters() of the built model
  std::vector<SizeTerm> terms;  // the groups, largest first
  [[nodiscard]] int64_t bytes(int64_t bytes_per_parameter) const;  // Error naming the largest term on overflow
  [[nodiscard]] std::string largest_term() const;  // "; largest: FIELDS = N parameters", "" without terms
};

// Parameter count of the model build_model(config) would build. Error naming the fields when the count
// (or a product on the way) overflows int64, or a size is not positive.
[[nodiscard]] ModelSize estimate_model_size(const io::HfConfig& config);

// Error when `copies` fp32 copies of the parameters plus `extra_bytes` (optimizer state) need more than
// `available_bytes`, naming the source, the dominant fields, the bytes needed and the bytes available (and
// where that figure comes from).
void check_model_fits(const ModelSize& size, int64_t copies, int64_t available_bytes,
                      const std::string& available_source, const std::string& source, const std::string& purpose,
                      int64_t extra_bytes = 0);

// Bytes held beside the fp32 copies, from the parameter count (e.g. an optimizer's state).
using ExtraBytes = std::function<int64_t(int64_t parameters)>;

// check_model_fits against available_host_memory() (no check when it cannot be read).
void check_model_fits_host(const io::HfConfig& config, int64_t copies, const std::string& source,
                           const std::string& purpose, const ExtraBytes& extra_bytes = {});

}  // namespace hpctrain::models
