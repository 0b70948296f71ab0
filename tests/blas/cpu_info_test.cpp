// cpu_info.hpp's pure parts: which training-relevant capabilities a flag set has, and the summary line.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/cpu_info.hpp"

using namespace hpctrain::core;

BOOST_AUTO_TEST_SUITE(cpu_info)

BOOST_AUTO_TEST_CASE(capabilities_of_a_zen5_flag_set) {
  const std::set<std::string> flags{"sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni"};
  const auto caps = cpu_capabilities(flags);
  BOOST_TEST_REQUIRE(caps.size() == 9U);
  BOOST_TEST(caps.front().first == "avx2");
  BOOST_TEST(caps.front().second);
  for (const auto& [name, present] : caps)
    BOOST_TEST(present == (name.rfind("amx", 0) != 0), name);
  BOOST_TEST(capability_summary(flags) == "avx2 fma avx512f avx512bw avx512_vnni avx512_bf16");
}

BOOST_AUTO_TEST_CASE(amx_and_nothing) {
  BOOST_TEST(capability_summary({"avx2", "amx_tile", "amx_bf16"}) == "avx2 amx_tile amx_bf16");
  BOOST_TEST(capability_summary({"sse2"}) == "none");
}

BOOST_AUTO_TEST_CASE(this_machine_answers) {
  BOOST_TEST(!cpu_model().empty());
  BOOST_TEST(!cpu_flags().empty());  // Linux: /proc/cpuinfo has flags
}

BOOST_AUTO_TEST_SUITE_END()
