// decide_blas_kernels (core/blas_kernels.hpp): a table of CPUs, cores and user settings.
#include "hpctrain/core/blas_kernels.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

namespace hpctrain::core {
namespace {

const std::set<std::string> kAvx512 = {"sse3", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq",
                                       "avx512vl", "avx512cd", "avx512_bf16"};
const std::set<std::string> kAvx2 = {"sse3", "avx", "avx2", "fma"};
const std::set<std::string> kSse = {"sse3", "ssse3", "sse4_2", "avx"};

struct Case {
  const char* what;
  BlasInputs in;
  bool reexec;
  const char* coretype;
};

BOOST_AUTO_TEST_CASE(decision_table) {
  const Case cases[] = {
      {"Prescott on an AVX-512 Xeon (Sapphire Rapids)", {"Prescott", kAvx512}, true, "SkylakeX"},
      {"Prescott on an AVX2-only CPU", {"Prescott", kAvx2}, true, "Haswell"},
      {"Nehalem on an AVX2 CPU", {"Nehalem", kAvx2}, true, "Haswell"},
      {"Haswell on an AVX-512 Zen 4/5 (measured 1.5x faster with SkylakeX)", {"Haswell", kAvx512}, true, "SkylakeX"},
      {"Haswell on an AVX2 CPU", {"Haswell", kAvx2}, false, ""},
      {"Zen on an AVX2-only Zen 2/3", {"Zen", kAvx2}, false, ""},
      {"Zen on an AVX-512 CPU", {"Zen", kAvx512}, true, "SkylakeX"},
      {"Cooperlake already", {"Cooperlake", kAvx512}, false, ""},
      {"SkylakeX already", {"SkylakeX", kAvx512}, false, ""},
      {"user-set OPENBLAS_CORETYPE", {"Prescott", kAvx512, "Prescott"}, false, ""},
      {"HPCTRAIN_BLAS_FIX=0", {"Prescott", kAvx512, nullptr, "0"}, false, ""},
      {"HPCTRAIN_BLAS_FIX=1 still fixes", {"Prescott", kAvx512, nullptr, "1"}, true, "SkylakeX"},
      {"after the re-exec", {"Prescott", kAvx512, nullptr, nullptr, true}, false, ""},
      {"no AVX2", {"Prescott", kSse}, false, ""},
      {"AVX2 without FMA", {"Prescott", {"avx", "avx2"}}, false, ""},
      {"AVX-512F only (no BW/DQ/VL): Haswell", {"Prescott", {"avx2", "fma", "avx512f"}}, true, "Haswell"},
      {"not OpenBLAS", {"", kAvx512}, false, ""},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      const BlasDecision d = decide_blas_kernels(c.in);
      BOOST_TEST(d.reexec == c.reexec);
      BOOST_TEST(d.coretype == std::string(c.coretype));
      BOOST_TEST(!d.reason.empty());
    }
  }
}

}  // namespace
}  // namespace hpctrain::core
