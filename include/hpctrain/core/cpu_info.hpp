// The CPU and BLAS as this process sees them: /proc/cpuinfo's model and flags, OpenBLAS's kernel core.
// Read by the BLAS kernel fix (blas_kernels.hpp), `hpctrain env`, the benchmarks' headers and the thread
// count's check (threads.hpp).
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

// CPUs this process may run on: its affinity mask (sched_getaffinity, what taskset, a cgroup cpuset or
// mpirun's binding allow), else the online CPUs; at least 1.
int affinity_cpus();
// Pure (Note [Too many threads]): the warning for `threads` per rank when they are more than twice the cores
// each of `local_size` ranks on the node can use out of `cpus` (cpus ÷ local_size, at least 1), else "".
// `option` names where the count came from ("--threads").
std::string thread_oversubscription(const std::string& option, int threads, int cpus, int local_size);

}  // namespace hpctrain::core
