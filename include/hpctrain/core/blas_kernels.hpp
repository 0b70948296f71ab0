// fp32 at the CPU's real speed: Debian's OpenBLAS 0.3.21 does not know recent CPUs (e.g. Sapphire Rapids)
// and falls back to its generic Prescott kernels, 6-10x slower GEMM. decide_blas_kernels is the pure
// decision (core name OpenBLAS reports + CPU flags -> keep, or re-exec with OPENBLAS_CORETYPE);
// fix_blas_kernels applies it at the very start of main(), before MPI and LibTorch start any threads.
#pragma once

#include <set>
#include <string>

namespace hpctrain::core {

// Environment variables (Note [BLAS kernels] in src/core/blas_kernels.cpp).
inline constexpr const char* kBlasFixVariable = "HPCTRAIN_BLAS_FIX";        // "0" turns the fix off
inline constexpr const char* kBlasFixedVariable = "HPCTRAIN_BLAS_FIXED";    // set on the re-exec (guard)
inline constexpr const char* kCoretypeVariable = "OPENBLAS_CORETYPE";       // OpenBLAS's own override

struct BlasInputs {
  std::string core_name;          // openblas_get_corename(), e.g. "Prescott"; "" when the BLAS is not OpenBLAS
  std::set<std::string> cpu_flags;  // the "flags" of /proc/cpuinfo: "avx2", "fma", "avx512f", ...
  const char* user_coretype = nullptr;  // OPENBLAS_CORETYPE as set by the user, or null
  const char* fix_setting = nullptr;    // HPCTRAIN_BLAS_FIX, or null
  bool already_reexecuted = false;      // HPCTRAIN_BLAS_FIXED is set: this process is the re-exec
};

struct BlasDecision {
  bool reexec = false;   // re-exec with OPENBLAS_CORETYPE = coretype
  std::string coretype;  // "Haswell" or "SkylakeX" when reexec
  std::string reason;    // why, for the log line (also when keeping)
};

// Pure. Re-exec when OpenBLAS runs one of its generic pre-AVX2 kernels on a CPU with AVX2 + FMA
// (-> Haswell) or with AVX-512 F/BW/DQ/VL/CD (-> SkylakeX), or its AVX2 kernels (Haswell, Zen) on a CPU
// with AVX-512 (-> SkylakeX: 1.5x on a Zen 5, bench/README.md), unless the user (OPENBLAS_CORETYPE,
// HPCTRAIN_BLAS_FIX=0) or an earlier re-exec decided already. Every other core is kept.
[[nodiscard]] BlasDecision decide_blas_kernels(const BlasInputs& inputs);

// Reads the core (dlsym of openblas_get_corename; absent with another BLAS), /proc/cpuinfo and the
// environment; on a re-exec decision sets OPENBLAS_CORETYPE and the guard and execv's /proc/self/exe
// with `argv` (returns only if that fails). Says so once, on rank 0 (rank from the launcher's
// environment: OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID). Call first in main().
void fix_blas_kernels(char** argv);

}  // namespace hpctrain::core
