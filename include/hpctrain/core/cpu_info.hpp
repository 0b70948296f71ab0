// The CPU and BLAS as this process sees them: /proc/cpuinfo's model and flags, OpenBLAS's kernel core.
// Read by the BLAS kernel fix (blas_kernels.hpp), `hpctrain env` and the benchmarks' headers.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::core {

// The "flags" of /proc/cpuinfo's first processor ("avx2", "avx512f", ...); empty where it cannot be read.
std::set<std::string> cpu_flags();
// The "model name" of /proc/cpuinfo's first processor, or "unknown".
std::string cpu_model();
// openblas_get_corename() (found with dlsym), e.g. "Haswell"; "" when the BLAS is not OpenBLAS.
std::string openblas_core();

// Pure: the capabilities that matter for training kernels, each with whether `flags` has it, in a fixed
// order: avx2, fma, avx512f, avx512bw, avx512_vnni, avx512_bf16, amx_tile, amx_bf16, amx_int8.
std::vector<std::pair<std::string, bool>> cpu_capabilities(const std::set<std::string>& flags);
// Pure: the present ones, space-separated ("avx2 fma avx512f ..."), or "none".
std::string capability_summary(const std::set<std::string>& flags);

}  // namespace hpctrain::core
