// BLAS kernel choice at start-up (blas_kernels.hpp).
#include "hpctrain/core/blas_kernels.hpp"

#include "hpctrain/core/cpu_info.hpp"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hpctrain::core {

// Note [BLAS kernels]
// OpenBLAS (DYNAMIC_ARCH) picks its kernels from the CPU's family/model at load time; a CPU newer than
// the library gets the generic Prescott (SSE3) kernels. OPENBLAS_CORETYPE overrides the choice, but it
// is read once when the library loads, i.e. before main(): so the fix is a re-exec of the same program
// with the variable set, before MPI_Init and before LibTorch starts threads (the process keeps its pid,
// so mpirun/srun never notice). HPCTRAIN_BLAS_FIXED guards against a second re-exec; the user's own
// OPENBLAS_CORETYPE and HPCTRAIN_BLAS_FIX=0 always win. tests/blas checks that the chosen kernels give the
// generic ones' GEMM results within fp32 rounding. A CPU with AVX-512 that OpenBLAS 0.3.21 gives its AVX2
// kernels (Haswell or Zen, for a CPU model it does not know) also gets SkylakeX: measured on a Zen 5 (EPYC,
// family 26), the DistilBERT benchmark step takes 0.53-0.60 s with SkylakeX against 0.87-0.92 s with Haswell
// and 1.97-2.21 s with Prescott (bench/README.md). Left to itself, OpenBLAS picks Cooperlake (AVX-512 + bf16)
// on that Zen 5, which the fix leaves alone.

namespace {

// OpenBLAS's generic cores below AVX2 (driver/others/dynamic.c, corename[]).
bool is_pre_avx2_core(const std::string& core) {
  static const std::array<const char*, 12> kCores = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem",
                                                     "Atom", "Katmai", "Coppermine", "Northwood", "Banias",
                                                     "Opteron", "Barcelona"};
  for (const char* name : kCores)
    if (core == name) return true;
  return false;
}

bool has_all(const std::set<std::string>& flags, std::initializer_list<const char*> wanted) {
  for (const char* flag : wanted)
    if (flags.count(flag) == 0) return false;
  return true;
}

}  // namespace

BlasDecision decide_blas_kernels(const BlasInputs& in) {
  BlasDecision keep;
  if (in.fix_setting != nullptr && std::strcmp(in.fix_setting, "0") == 0) return keep.reason = "HPCTRAIN_BLAS_FIX=0", keep;
  if (in.already_reexecuted) return keep.reason = "already re-executed with OPENBLAS_CORETYPE", keep;
  if (in.user_coretype != nullptr) return keep.reason = std::string("OPENBLAS_CORETYPE=") + in.user_coretype + " set by the user", keep;
  if (in.core_name.empty()) return keep.reason = "the BLAS is not OpenBLAS", keep;
  const bool avx512 = has_all(in.cpu_flags, {"avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"});
  const bool avx2_core = in.core_name == "Haswell" || in.core_name == "Zen";
  if (!is_pre_avx2_core(in.core_name) && !(avx2_core && avx512))
    return keep.reason = "OpenBLAS already uses its " + in.core_name + " kernels", keep;
  if (!has_all(in.cpu_flags, {"avx2", "fma"})) return keep.reason = "the CPU has no AVX2/FMA", keep;
  BlasDecision fix;
  fix.reexec = true;
  fix.coretype = avx512 ? "SkylakeX" : "Haswell";
  fix.reason = "OpenBLAS chose its " + in.core_name + " kernels on a CPU with " + (avx512 ? "AVX-512" : "AVX2") +
               "; using its " + fix.coretype + " kernels";
  return fix;
}

namespace {

bool is_rank_zero() {
  for (const char* variable : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(variable)) return std::strcmp(value, "0") == 0;
  }
  return true;
}

}  // namespace

void fix_blas_kernels(char** argv) {
  BlasInputs in;
  in.fix_setting = std::getenv(kBlasFixVariable);
  in.user_coretype = std::getenv(kCoretypeVariable);
  in.already_reexecuted = std::getenv(kBlasFixedVariable) != nullptr;
  if ((in.fix_setting != nullptr && std::strcmp(in.fix_setting, "0") == 0) || in.already_reexecuted) return;
  in.core_name = openblas_core();
  in.cpu_flags = cpu_flags();
  const BlasDecision decision = decide_blas_kernels(in);
  if (!decision.reexec) return;
  if (is_rank_zero())
    std::fprintf(stderr, "info: %s (OPENBLAS_CORETYPE=%s; HPCTRAIN_BLAS_FIX=0 turns this off)\n",
                 decision.reason.c_str(), decision.coretype.c_str());
  setenv(kCoretypeVariable, decision.coretype.c_str(), 1);
  setenv(kBlasFixedVariable, in.core_name.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::fprintf(stderr, "warning: re-executing with OPENBLAS_CORETYPE=%s failed (%s); continuing with %s kernels\n",
               decision.coretype.c_str(), std::strerror(errno), in.core_name.c_str());
}

}  // namespace hpctrain::core
