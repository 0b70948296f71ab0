// cpu_info.hpp's pure parts: which training-relevant capabilities a flag set has, and the summary line.
#include <boost/test/unit_test.hpp>

#include <string>

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

// Note [Too many threads]: a warning only past twice the cores each rank can use, naming the option, the
// count, the usable cores and the ranks on the node.
BOOST_AUTO_TEST_CASE(thread_oversubscription_warns_past_twice_the_usable_cores) {
  BOOST_TEST(thread_oversubscription("--threads", 1, 2, 2).empty());
  BOOST_TEST(thread_oversubscription("--threads", 2, 2, 2).empty());  // 2 x 1 usable: within the slack
  BOOST_TEST(thread_oversubscription("--threads", 16, 64, 4).empty());
  BOOST_TEST(thread_oversubscription("--threads", 32, 64, 4).empty());
  BOOST_TEST(thread_oversubscription("--threads", 1, 1, 8).empty());  // more ranks than CPUs: 1 usable each
  const std::string warning = thread_oversubscription("--threads", 64, 2, 2);
  BOOST_TEST(warning.find("--threads 64: more than twice the 1 core(s) each rank can use (2 CPU(s) this process may "
                          "run on ÷ 2 rank(s) on this node)") != std::string::npos,
             warning);
  BOOST_TEST(warning.find("hint: use --threads 1") != std::string::npos, warning);
  BOOST_TEST(thread_oversubscription("--threads", 4, 2, 1).empty());
  BOOST_TEST(!thread_oversubscription("--threads", 5, 2, 1).empty());
  BOOST_TEST(!thread_oversubscription("--threads", 33, 64, 4).empty());
}

BOOST_AUTO_TEST_CASE(this_machine_answers) {
  BOOST_TEST(!cpu_model().empty());
  BOOST_TEST(!cpu_flags().empty());  // Linux: /proc/cpuinfo has flags
  BOOST_TEST(affinity_cpus() >= 1);
}

BOOST_AUTO_TEST_SUITE_END()
