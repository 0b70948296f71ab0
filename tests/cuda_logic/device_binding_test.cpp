// Device binding (Note [One GPU per rank], Note [Current device]): one CUDA_VISIBLE_DEVICES shared by a node's
// ranks is detected, and a CUDA device is refused at start-up by a build without CUDA support.
#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "../error_capture.hpp"
#include "hpctrain/train/device.hpp"

using hpctrain::testing::contains;
using hpctrain::testing::error_message;
using namespace hpctrain::train;

namespace {

std::vector<std::optional<std::string>> binding_values(std::initializer_list<const char*> values) {
  std::vector<std::optional<std::string>> out;
  for (const char* value : values) out.push_back(value ? std::optional<std::string>(value) : std::nullopt);
  return out;
}

DeviceView node_view(int local_rank, int local_size, int gpus, const char* visible, bool shared) {
  DeviceView v;
  v.choice = "auto";
  v.local_rank = local_rank;
  v.local_size = local_size;
  v.visible_gpus = gpus;
  if (visible) v.cuda_visible_devices = visible;
  v.node_shares_visible_devices = shared;
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device_binding)

BOOST_AUTO_TEST_CASE(one_value_exported_to_every_rank_is_detected) {
  BOOST_TEST(visible_devices_shared_on_node(binding_values({"0", "0"})));
  BOOST_TEST(visible_devices_shared_on_node(binding_values({"0,1", "0,1", "0,1"})));
  BOOST_TEST(!visible_devices_shared_on_node(binding_values({"0", "1"})));          // srun --gpus-per-task=1
  BOOST_TEST(!visible_devices_shared_on_node(binding_values({"0"})));               // one rank on the node
  BOOST_TEST(!visible_devices_shared_on_node(binding_values({nullptr, nullptr})));  // unset
  BOOST_TEST(!visible_devices_shared_on_node(binding_values({"", ""})));
  BOOST_TEST(!visible_devices_shared_on_node(binding_values({"0", nullptr})));
}

BOOST_AUTO_TEST_CASE(shared_value_is_an_error_naming_it_unless_sharing_is_asked_for) {
  DeviceView v = node_view(1, 2, 1, "0", /*shared=*/true);
  const std::string message = error_message([&] { (void)plan_device(v); });
  BOOST_TEST(contains(message, "all 2 ranks on this node have CUDA_VISIBLE_DEVICES=0"), message);
  BOOST_TEST(contains(message, "HPCTRAIN_SHARE_GPUS=1"), message);
  v.share_gpus = true;
  BOOST_TEST(plan_device(v) == at::Device(at::kCUDA, 0));
  // A per-rank binding (different values) still gives each rank its one visible device.
  BOOST_TEST(plan_device(node_view(1, 2, 1, "1", /*shared=*/false)) == at::Device(at::kCUDA, 0));
  // Enough devices for every rank: the shared value is harmless.
  BOOST_TEST(plan_device(node_view(1, 2, 2, "0,1", /*shared=*/true)) == at::Device(at::kCUDA, 1));
  BOOST_TEST(plan_device(node_view(1, 2, 0, "0", /*shared=*/true)).is_cpu());  // no GPU: the CPU
}

BOOST_AUTO_TEST_CASE(cuda_is_refused_without_cuda_support_naming_the_option) {
  const std::string message = error_message([] { check_device_supported(at::Device(at::kCUDA, 1), false); });
  BOOST_TEST(contains(message, "device cuda:1"), message);
  BOOST_TEST(contains(message, "-DHPCTRAIN_WITH_CUDA=ON"), message);
  BOOST_TEST(error_message([] { check_device_supported(at::Device(at::kCUDA, 0), true); }).empty());
  BOOST_TEST(error_message([] { check_device_supported(at::Device(at::kCPU), false); }).empty());
#if !HPCTRAIN_WITH_CUDA
  // This build: use_device (what the Accelerator runs at start-up) refuses before touching the device.
  BOOST_TEST(contains(error_message([] { use_device(at::Device(at::kCUDA, 0)); }), "-DHPCTRAIN_WITH_CUDA=ON"));
#endif
  use_device(at::Device(at::kCPU));  // nothing to bind
}

BOOST_AUTO_TEST_SUITE_END()
