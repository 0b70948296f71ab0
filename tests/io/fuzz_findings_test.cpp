// Regression tests for what fuzzing found in the io parsers (docs/fuzzing.md); each reproducer is also kept in
// fuzz/corpus/<target>/crash-*.
#include "hpctrain/io/hf_config.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <chrono>

namespace io = hpctrain::io;
using io::test::require_error;
using nlohmann::json;

BOOST_AUTO_TEST_SUITE(fuzz_findings)

// fuzz_hf_config: "num_labels": 2147483648 built 2^31 label names (minutes and tens of GB) before any check.
BOOST_AUTO_TEST_CASE(huge_num_labels_is_refused_at_once) {
  const auto start = std::chrono::steady_clock::now();
  require_error([] { (void)io::HfConfig::from_json(json::parse(R"({"model_type": "bert", "num_labels": 2147483648})"),
                                                   "test/config.json"); },
                {"test/config.json", "num_labels", "2147483648", "at most"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST(seconds < 1.0);
  io::CommonConfig common;
  require_error([&] { common.set_num_labels(std::int64_t{1} << 40); }, {"num_labels", "1099511627776", "at most"});
  BOOST_TEST(common.num_labels() == 2);  // unchanged
}

BOOST_AUTO_TEST_CASE(largest_num_labels_is_accepted) {
  const io::HfConfig config = io::HfConfig::from_json(
      json{{"model_type", "bert"}, {"num_labels", io::kMaxNumLabels}}, "test/config.json");
  BOOST_TEST(config.common.num_labels() == io::kMaxNumLabels);
}

BOOST_AUTO_TEST_SUITE_END()
