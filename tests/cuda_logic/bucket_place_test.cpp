// Where the reducer keeps its buckets (plan_bucket_place, Note [Device buckets]) for each device and
// communicator, decided without a GPU through a fake communicator; and with one rank off the CPU the reducer
// installs nothing and copies nothing (parameters on `meta`, which no copy to the host could read).
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "ddp/bucket_place.hpp"
#include "fake_comm.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"

using hpctrain::ddp::BucketPlace;
using hpctrain::ddp::plan_bucket_place;

BOOST_AUTO_TEST_SUITE(bucket_place)

BOOST_AUTO_TEST_CASE(placement_follows_device_world_and_cuda_awareness) {
  const fake::TwoRankComm cuda_aware(/*cuda_aware=*/true), host_only(/*cuda_aware=*/false);
  const auto one_rank = hpctrain::dist::make_single_process_comm();
  const at::Device gpu(at::kCUDA, 1), cpu(at::kCPU);
  BOOST_TEST((plan_bucket_place(gpu, cuda_aware) == BucketPlace::device));
  BOOST_TEST((plan_bucket_place(gpu, host_only) == BucketPlace::pinned_host));
  BOOST_TEST((plan_bucket_place(gpu, *one_rank) == BucketPlace::none));
  BOOST_TEST((plan_bucket_place(cpu, cuda_aware) == BucketPlace::host));
  BOOST_TEST((plan_bucket_place(cpu, host_only) == BucketPlace::host));
  BOOST_TEST((plan_bucket_place(cpu, *one_rank) == BucketPlace::host));
}

BOOST_AUTO_TEST_CASE(one_rank_off_the_cpu_copies_nothing) {
  const at::TensorOptions meta = at::TensorOptions().device(at::kMeta);
  const at::Tensor weight = at::empty({8, 4}, meta).set_requires_grad(true);
  const at::Tensor bias = at::empty({8}, meta).set_requires_grad(true);
  const auto comm = hpctrain::dist::make_single_process_comm();
  int fences = 0;
  hpctrain::ddp::ReducerOptions options;
  options.on_fence = [&fences](const at::Tensor&) { ++fences; };
  hpctrain::ddp::GradientReducer reducer(*comm, {{"weight", weight}, {"bias", bias}}, options);
  const at::Tensor x = at::empty({3, 4}, meta);
  (at::matmul(x, weight.t()) + bias).sum().backward();
  BOOST_TEST(reducer.finalize().empty());
  BOOST_TEST(fences == 0);
  BOOST_TEST(weight.grad().defined());  // autograd's own gradient, left in place
  BOOST_TEST(weight.grad().is_meta());
  BOOST_TEST(reducer.last_step_stats().bytes_reduced == 0);
  reducer.average_parameters();  // nothing to average with one rank
  BOOST_TEST(fences == 0);
}

BOOST_AUTO_TEST_SUITE_END()
