// Parameter counts from the config (Note [Size before building]) equal the built models', overflow and
// memory refusals name the fields and the limit, and the parsing of /proc and cgroup text.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <new>

#include "../error_capture.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/registry.hpp"

namespace hpctrain::models {
namespace {

using Json = nlohmann::json;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;

int64_t built_parameters(const io::HfConfig& config) {
  int64_t total = 0;
  for (const auto& item : from_config(config)->named_parameters()) total += item.value().numel();
  return total;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(model_size)

BOOST_AUTO_TEST_CASE(estimates_equal_the_built_models) {
  const std::vector<Json> configs = {
      {{"model_type", "distilbert"},
       {"vocab_size", 120},
       {"dim", 32},
       {"n_layers", 3},
       {"n_heads", 4},
       {"hidden_dim", 48},
       {"max_position_embeddings", 40},
       {"num_labels", 5}},
      {{"model_type", "distilbert"},
       {"vocab_size", 50},
       {"dim", 16},
       {"n_layers", 1},
       {"n_heads", 2},
       {"hidden_dim", 8},
       {"sinusoidal_pos_embds", true}},
      {{"model_type", "bert"},
       {"vocab_size", 90},
       {"hidden_size", 24},
       {"num_hidden_layers", 2},
       {"num_attention_heads", 4},
       {"intermediate_size", 40},
       {"max_position_embeddings", 30},
       {"type_vocab_size", 3},
       {"num_labels", 4}},
      {{"model_type", "hpctrain-cnn"},
       {"in_channels", 3},
       {"image_size", 12},
       {"conv_channels", {4, 6}},
       {"hidden", {10}},
       {"num_labels", 7}},
      {{"model_type", "hpctrain-cnn"},
       {"in_channels", 1},
       {"image_size", 9},
       {"conv_channels", {5}},
       {"hidden", Json::array()}},
      {{"model_type", "hpctrain-mlp"}, {"in_channels", 2}, {"image_size", 5}, {"hidden", {7, 3}}, {"num_labels", 3}},
  };
  for (const Json& object : configs) {
    const io::HfConfig config = io::HfConfig::from_json(object);
    BOOST_TEST_INFO(object.dump());
    BOOST_CHECK_EQUAL(estimate_model_size(config).parameters, built_parameters(config));
  }
}

BOOST_AUTO_TEST_CASE(overflow_names_the_fields) {
  const auto config = io::HfConfig::from_json(
      {{"model_type", "distilbert"}, {"vocab_size", int64_t{1} << 60}, {"dim", 768}, {"n_heads", 12}});
  const std::string error = error_message([&] { (void)estimate_model_size(config); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "vocab_size x dim overflows int64"));
}

BOOST_AUTO_TEST_CASE(a_model_larger_than_the_memory_is_refused_with_fields_and_bytes) {
  const auto config = io::HfConfig::from_json({{"model_type", "distilbert"},
                                               {"vocab_size", 1000},
                                               {"dim", 64},
                                               {"n_heads", 4},
                                               {"n_layers", 2},
                                               {"hidden_dim", 128}});
  const ModelSize size = estimate_model_size(config);
  BOOST_CHECK_NO_THROW(check_model_fits(size, 1, size.bytes(4), "test", "cfg.json", "building the model"));
  const std::string error = error_message(
      [&] { check_model_fits(size, 4, size.bytes(4), "MemAvailable in /proc/meminfo", "cfg.json", "training"); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "cfg.json: the model has " + std::to_string(size.parameters) + " parameters"));
  BOOST_CHECK(contains(error, "largest: vocab_size 1000 x dim 64 = 64000 parameters"));
  BOOST_CHECK(contains(error, "(" + std::to_string(size.bytes(16)) + " bytes)"));
  BOOST_CHECK(contains(error, "MemAvailable in /proc/meminfo"));
  // Optimizer state beside the copies: it alone can tip the balance, and the message names it.
  BOOST_CHECK_NO_THROW(check_model_fits(size, 2, size.bytes(8), "test", "cfg.json", "training"));
  const std::string with_state = error_message(
      [&] { check_model_fits(size, 2, size.bytes(8), "test", "cfg.json", "training", /*extra_bytes=*/1); });
  BOOST_TEST_INFO(with_state);
  BOOST_CHECK(contains(with_state, "(2 fp32 copies + 0.00 GiB (1 bytes) of optimizer state)"));
}

// dim 10^9 (with 6 layers the count overflows int64): refused from the config in well under a second, before any tensor
// is allocated.
BOOST_AUTO_TEST_CASE(from_config_refuses_an_absurd_config_fast) {
  const auto config =
      io::HfConfig::from_json({{"model_type", "distilbert"}, {"dim", 1000000000}, {"n_heads", 8}}, "huge/config.json");
  const auto start = std::chrono::steady_clock::now();
  const std::string error = error_message([&] { (void)from_config(config); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_INFO(error);
  BOOST_CHECK(
      contains(error, "huge/config.json: n_layers 6 x 4 attention projections (dim 1000000000 x dim) overflows int64"));
  BOOST_CHECK_LT(seconds, 0.5);
}

BOOST_AUTO_TEST_CASE(meminfo_is_parsed_in_bytes) {
  BOOST_CHECK_EQUAL(
      core::parse_mem_available("MemTotal:  100 kB\nMemFree:  5 kB\nMemAvailable:   2048 kB\n").value_or(-1),
      2048 * 1024);
  BOOST_CHECK(!core::parse_mem_available("MemTotal: 100 kB\n").has_value());
  const auto available = core::available_host_memory();
  BOOST_REQUIRE(available.has_value());  // Linux: /proc/meminfo is always there
  BOOST_CHECK_GT(available->bytes, 0);
}

// dim 10^9 with one layer: the count fits int64, its bytes do not; the message names config.json and the field.
BOOST_AUTO_TEST_CASE(byte_overflow_names_the_config_and_the_field) {
  const auto config = io::HfConfig::from_json(
      {{"model_type", "distilbert"}, {"dim", 1000000000}, {"n_heads", 8}, {"n_layers", 1}, {"hidden_dim", 4}},
      "huge/config.json");
  const std::string error = error_message([&] { (void)from_config(config); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "huge/config.json: the parameter bytes overflow int64"));
  BOOST_CHECK(contains(error, "largest: n_layers 1 x 4 attention projections (dim 1000000000 x dim)"));
}

BOOST_AUTO_TEST_CASE(room_under_a_limit) {
  BOOST_CHECK_EQUAL(core::room_under_limit(int64_t{8} << 30, int64_t{3} << 30).value_or(-1), int64_t{5} << 30);
  BOOST_CHECK_EQUAL(core::room_under_limit(int64_t{1} << 30, int64_t{2} << 30).value_or(-1), 0);  // over the limit
  BOOST_CHECK(!core::room_under_limit(std::nullopt, 100).has_value());                           // no limit file
  BOOST_CHECK(!core::room_under_limit(INT64_MAX, 100).has_value());           // RLIM_INFINITY, v2 "max"
  BOOST_CHECK(!core::room_under_limit(9223372036854771712, 100).has_value());  // v1 "no limit": 2^63 - 4096
}

BOOST_AUTO_TEST_CASE(the_cgroup_folders_of_this_process_and_its_parents) {
  const std::string v2 = "0::/system.slice/slurmstepd.scope/job_7/step_0\n";
  BOOST_CHECK((core::cgroup_memory_dirs(v2, "/sys/fs/cgroup", true) ==
               std::vector<std::string>{"/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0",
                                        "/sys/fs/cgroup/system.slice/slurmstepd.scope/job_7",
                                        "/sys/fs/cgroup/system.slice/slurmstepd.scope", "/sys/fs/cgroup/system.slice",
                                        "/sys/fs/cgroup"}));
  BOOST_CHECK(core::cgroup_memory_dirs(v2, "/sys/fs/cgroup/memory", false).empty());
  const std::string v1 = "5:cpu,cpuacct:/slurm/uid_0/job_7\n4:memory:/slurm/uid_0/job_7/step_0\n0::/\n";
  BOOST_CHECK((core::cgroup_memory_dirs(v1, "/m", false) ==
               std::vector<std::string>{"/m/slurm/uid_0/job_7/step_0", "/m/slurm/uid_0/job_7", "/m/slurm/uid_0",
                                        "/m/slurm", "/m"}));
  BOOST_CHECK((core::cgroup_memory_dirs(v1, "/u", true) == std::vector<std::string>{"/u"}));  // "0::/": the root
  BOOST_CHECK((core::cgroup_memory_dirs("3:blkio,memory:/a\n", "/m", false) == std::vector<std::string>{"/m/a", "/m"}));
}

// RLIMIT_AS (`ulimit -v`) counts: with the soft limit 256 MiB above what is mapped now, at most 256 MiB are available
// and the figure names the limit; a model needing more is refused before anything is allocated.
BOOST_AUTO_TEST_CASE(the_address_space_limit_counts) {
  rlimit saved{};
  BOOST_REQUIRE_EQUAL(getrlimit(RLIMIT_AS, &saved), 0);
  const auto status = [] {
    std::ifstream in("/proc/self/status");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const int64_t mapped = core::parse_kb_field(status, "VmSize:").value_or(0);
  BOOST_REQUIRE_GT(mapped, 0);
  rlimit tight = saved;
  tight.rlim_cur = static_cast<rlim_t>(mapped + (int64_t{256} << 20));
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < tight.rlim_cur) return;  // a lower hard limit: cannot set
  BOOST_REQUIRE_EQUAL(setrlimit(RLIMIT_AS, &tight), 0);
  const auto available = core::available_host_memory();
  const auto config = io::HfConfig::from_json(
      {{"model_type", "distilbert"}, {"dim", 16}, {"hidden_dim", 32}, {"n_heads", 2}, {"n_layers", 40000}, {"vocab_size", 40}},
      "deep/config.json");
  const std::string error = error_message([&] { (void)from_config(config); });  // 356 MB of parameters
  BOOST_REQUIRE_EQUAL(setrlimit(RLIMIT_AS, &saved), 0);
  BOOST_REQUIRE(available.has_value());
  BOOST_CHECK_LE(available->bytes, int64_t{256} << 20);
  BOOST_TEST_INFO(available->source);
  BOOST_CHECK(contains(available->source, "RLIMIT_AS (ulimit -v)"));
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "deep/config.json: the model has"));
  BOOST_CHECK(contains(error, "the address-space limit RLIMIT_AS (ulimit -v)"));
}

BOOST_AUTO_TEST_CASE(allocation_failures_are_recognized_and_described) {
  BOOST_CHECK(core::is_allocation_failure(std::bad_alloc()));
  BOOST_CHECK(core::is_allocation_failure(std::runtime_error(
      "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate "
      "13700000000 bytes. Error code 12 (Cannot allocate memory)")));
  BOOST_CHECK(!core::is_allocation_failure(std::runtime_error("config.json: dim = 0: expected a positive size")));
  // Ours already describes it (and quotes LibTorch's words): not described twice on the way up.
  BOOST_CHECK(!core::is_allocation_failure(Error("m: ran out of memory (DefaultCPUAllocator: can't allocate memory)")));
  const std::string message = core::describe_allocation_failure(std::bad_alloc());
  BOOST_TEST_INFO(message);
  BOOST_CHECK(contains(message, "ran out of memory (std::bad_alloc); "));
  BOOST_CHECK(contains(message, " are available after it ("));
  const std::string torch = core::describe_allocation_failure(
      std::runtime_error("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes.\nframe #0: ..."));
  BOOST_TEST_INFO(torch);
  BOOST_CHECK(contains(torch, "ran out of memory (DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes.); "));
  BOOST_CHECK(!contains(torch, "frame #0"));  // LibTorch's backtrace is left out
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
