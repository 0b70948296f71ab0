// AutocastScope(CUDA) sets and restores the CUDA autocast flag and dtype (compat/torch.hpp, both LibTorch
// versions), leaving the CPU's alone; AutocastState captures and re-enters the CUDA half. No GPU needed: the
// flags are thread-local state.
#include <boost/test/unit_test.hpp>

#include "hpctrain/compat/autocast_state.hpp"
#include "hpctrain/compat/torch.hpp"

using hpctrain::compat::AutocastScope;
using hpctrain::compat::AutocastState;
using hpctrain::compat::AutocastStateGuard;

BOOST_AUTO_TEST_SUITE(autocast_cuda)

BOOST_AUTO_TEST_CASE(scope_sets_and_restores_cuda_flags) {
  const AutocastState before = AutocastState::current();
  BOOST_TEST(!before.cuda_enabled);
  {
    const AutocastScope bf16(c10::DeviceType::CUDA, true, c10::kBFloat16);
    const AutocastState inside = AutocastState::current();
    BOOST_TEST(inside.cuda_enabled);
    BOOST_TEST(AutocastScope::is_enabled(c10::DeviceType::CUDA));
    BOOST_TEST(inside.cuda_dtype == c10::kBFloat16);
    BOOST_TEST(inside.cpu_enabled == before.cpu_enabled);  // the CPU's flag is not CUDA's
    BOOST_TEST(inside.cpu_dtype == before.cpu_dtype);
    {
      const AutocastScope fp32(c10::DeviceType::CUDA, false);  // an fp32 island keeps the dtype
      BOOST_TEST(!AutocastScope::is_enabled(c10::DeviceType::CUDA));
      BOOST_TEST(AutocastState::current().cuda_dtype == c10::kBFloat16);
    }
    BOOST_TEST(AutocastScope::is_enabled(c10::DeviceType::CUDA));
    {
      const AutocastScope fp16(c10::DeviceType::CUDA, true, c10::kHalf);
      BOOST_TEST(AutocastState::current().cuda_dtype == c10::kHalf);
    }
    BOOST_TEST(AutocastState::current().cuda_dtype == c10::kBFloat16);
  }
  const AutocastState after = AutocastState::current();
  BOOST_TEST(after.cuda_enabled == before.cuda_enabled);
  BOOST_TEST(after.cuda_dtype == before.cuda_dtype);
  BOOST_TEST(!AutocastScope::is_enabled(c10::DeviceType::CUDA));
}

BOOST_AUTO_TEST_CASE(state_guard_reenters_and_restores_cuda_state) {
  AutocastState captured;
  {
    const AutocastScope fp16(c10::DeviceType::CUDA, true, c10::kHalf);
    captured = AutocastState::current();  // what a thread hands to another (e.g. checkpoint recomputation)
  }
  BOOST_TEST(!AutocastScope::is_enabled(c10::DeviceType::CUDA));
  {
    const AutocastStateGuard guard(captured);
    BOOST_TEST(AutocastScope::is_enabled(c10::DeviceType::CUDA));
    BOOST_TEST(AutocastState::current().cuda_dtype == c10::kHalf);
  }
  BOOST_TEST(!AutocastScope::is_enabled(c10::DeviceType::CUDA));
}

BOOST_AUTO_TEST_SUITE_END()
