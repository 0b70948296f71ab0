// plan_device (Note [One GPU per rank]): which device a rank binds to for each launch shape.
#include <boost/test/unit_test.hpp>

#include <string>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/device.hpp"

using namespace hpctrain::train;

namespace {

DeviceView view(const std::string& choice, int local_rank, int local_size, int gpus) {
  DeviceView v;
  v.choice = choice;
  v.local_rank = local_rank;
  v.local_size = local_size;
  v.visible_gpus = gpus;
  return v;
}

std::string error_of(const DeviceView& v) {
  try {
    (void)plan_device(v);
  } catch (const hpctrain::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(device)

BOOST_AUTO_TEST_CASE(cpu_always_and_auto_without_gpus) {
  BOOST_TEST(plan_device(view("cpu", 1, 2, 8)).is_cpu());
  BOOST_TEST(plan_device(view("auto", 3, 4, 0)).is_cpu());
}

BOOST_AUTO_TEST_CASE(one_gpu_per_local_rank) {
  for (int r = 0; r < 4; ++r) {
    const at::Device d = plan_device(view("auto", r, 4, 8));
    BOOST_TEST(d.is_cuda());
    BOOST_TEST(d.index() == r);
  }
  BOOST_TEST(plan_device(view("cuda", 1, 2, 2)).index() == 1);
}

BOOST_AUTO_TEST_CASE(launcher_bound_one_gpu_per_rank) {
  DeviceView v = view("cuda", 3, 4, 1);
  v.cuda_visible_devices = "3";  // srun --gpus-per-task=1
  const at::Device d = plan_device(v);
  BOOST_TEST(d.is_cuda());
  BOOST_TEST(d.index() == 0);
}

BOOST_AUTO_TEST_CASE(more_ranks_than_gpus_is_an_error_unless_shared) {
  DeviceView v = view("auto", 3, 4, 2);
  v.cuda_visible_devices = "0,1";
  const std::string message = error_of(v);
  BOOST_TEST(message.find("4 ranks on this node but 2 visible CUDA devices") != std::string::npos, message);
  BOOST_TEST(message.find("CUDA_VISIBLE_DEVICES=0,1") != std::string::npos, message);
  BOOST_TEST(message.find("HPCTRAIN_SHARE_GPUS=1") != std::string::npos, message);
  BOOST_TEST(error_of(view("auto", 1, 2, 1)).find("2 ranks on this node but 1 visible CUDA device ") !=
             std::string::npos);
  v.share_gpus = true;
  BOOST_TEST(plan_device(v).index() == 1);
}

BOOST_AUTO_TEST_CASE(cuda_without_a_device_and_bad_choices_are_errors) {
  BOOST_TEST(error_of(view("cuda", 0, 1, 0)).find("--device cuda: this process sees no CUDA device") !=
             std::string::npos);
  BOOST_TEST(error_of(view("gpu", 0, 1, 1)).find("expected auto, cpu or cuda, got 'gpu'") != std::string::npos);
  BOOST_TEST(error_of(view("auto", 2, 2, 1)).find("local rank 2 outside the node's 2 ranks") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
