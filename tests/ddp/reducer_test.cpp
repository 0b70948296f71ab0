// GradientReducer with the single-process communicator: it must reproduce plain backward exactly,
// whatever the bucket sizes and overlap mode, including accumulation, unused and late gradients.
#include <boost/test/unit_test.hpp>

#include <ATen/Parallel.h>

#include <cstdlib>
#include <cstring>

#include "hpctrain/core/error.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"
#include "tiny_model.hpp"

using hpctrain::ddp::GradientReducer;
using hpctrain::ddp::NoSyncScope;
using hpctrain::ddp::ReducerOptions;

namespace {

struct Fixture {
  Fixture() { at::set_num_threads(1); }
  std::unique_ptr<hpctrain::dist::Comm> comm = hpctrain::dist::make_single_process_comm();
};

std::vector<ReducerOptions> all_options() {
  std::vector<ReducerOptions> options;
  for (bool overlap : {true, false}) {
    options.push_back({hpctrain::dist::kDefaultFirstBucketBytes, hpctrain::dist::kDefaultBucketBytes, overlap});
    options.push_back({16, 64, overlap});  // tiny caps: many buckets
    options.push_back({1, 1, overlap});    // one bucket per parameter
  }
  return options;
}

// One process whose "MPI" only allows the main thread to communicate.
class FunneledComm final : public hpctrain::dist::Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void barrier() override {}
  void allreduce(void*, std::size_t, hpctrain::dist::DType, hpctrain::dist::ReduceOp) override {}
  void broadcast(void*, std::size_t, int) override {}
  void allgather(const void* data, std::size_t bytes, void* out) override { std::memcpy(out, data, bytes); }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
  hpctrain::dist::ThreadLevel thread_level() const override { return hpctrain::dist::ThreadLevel::funneled; }
  std::unique_ptr<Comm> duplicate() override { return std::make_unique<FunneledComm>(); }
};

std::vector<at::Tensor> plain_grads(const tiny::Model& model, const std::vector<at::Tensor>& inputs,
                                    bool use_optional = true) {
  return tiny::replica_grads(model, inputs, use_optional);
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(gradient_reducer, Fixture)

BOOST_AUTO_TEST_CASE(matches_plain_backward) {
  for (const ReducerOptions& options : all_options()) {
    tiny::Model model = tiny::Model::make(7);
    GradientReducer reducer(*comm, model.params, options);
    BOOST_TEST(reducer.overlap() == options.overlap);
    for (int step = 0; step < 3; ++step) {
      const std::vector<at::Tensor> expected = plain_grads(model, {tiny::input_for(0, step)});
      model.zero_grads();
      model.loss(tiny::input_for(0, step)).backward();
      BOOST_TEST(reducer.finalize().empty());
      BOOST_TEST(tiny::max_difference(model.grads(), expected) == 0.0);
    }
    BOOST_TEST(reducer.total_stats().steps == 3);
  }
}

BOOST_AUTO_TEST_CASE(overlap_falls_back_without_thread_multiple) {
  FunneledComm funneled;
  tiny::Model model = tiny::Model::make(7);
  GradientReducer reducer(funneled, model.params, {16, 64, true});
  BOOST_TEST(!reducer.overlap());
  model.loss(tiny::input_for(0)).backward();
  const std::string warning = reducer.finalize();
  BOOST_TEST(warning.find("MPI_THREAD_MULTIPLE") != std::string::npos, warning);
  BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, {tiny::input_for(0)})) == 0.0);
  model.zero_grads();
  model.loss(tiny::input_for(0)).backward();
  BOOST_TEST(reducer.finalize().empty());  // said once
}

BOOST_AUTO_TEST_CASE(buckets_follow_assign_buckets_with_dtype_groups) {
  tiny::Model model = tiny::Model::make(7);
  GradientReducer reducer(*comm, model.params, {16, 64, true});
  // head.bias (index 5) is float64: alone in its group, so alone in its bucket.
  std::vector<int64_t> sizes;
  std::vector<int> groups;
  for (const auto& [name, tensor] : model.params) {
    sizes.push_back(tensor.numel() * (tensor.scalar_type() == at::kDouble ? 8 : 4));
    groups.push_back(tensor.scalar_type() == at::kDouble ? 1 : 0);
  }
  BOOST_TEST(reducer.buckets() == hpctrain::dist::assign_buckets(sizes, groups, 16, 64));
  bool bias_alone = false;
  for (const auto& bucket : reducer.buckets()) bias_alone = bias_alone || bucket == hpctrain::dist::Bucket{5};
  BOOST_TEST(bias_alone);
}

BOOST_AUTO_TEST_CASE(stats_count_every_bucket_byte) {
  tiny::Model model = tiny::Model::make(7);
  GradientReducer reducer(*comm, model.params, {16, 64, false});
  model.loss(tiny::input_for(0)).backward();
  BOOST_TEST(reducer.finalize().empty());
  int64_t expected_bytes = 0;
  for (const auto& [name, tensor] : model.params) expected_bytes += tensor.numel() * (tensor.scalar_type() == at::kDouble ? 8 : 4);
  BOOST_TEST(reducer.last_step_stats().bytes_reduced == expected_bytes);
  BOOST_TEST(reducer.last_step_stats().exposed_seconds >= 0.0);
  BOOST_TEST(reducer.total_stats().bytes_reduced == expected_bytes);
}

BOOST_AUTO_TEST_CASE(unused_parameter_is_zero_and_named_once) {
  for (const ReducerOptions& options : all_options()) {
    tiny::Model model = tiny::Model::make(7);
    GradientReducer reducer(*comm, model.params, options);
    for (int step = 0; step < 2; ++step) {
      model.zero_grads();
      model.loss(tiny::input_for(0, step), /*use_optional=*/false).backward();
      const std::string warning = reducer.finalize();
      BOOST_TEST(reducer.unused_parameters() == std::vector<std::string>{"optional.scale"});
      if (step == 0) {
        BOOST_TEST(warning.find("optional.scale") != std::string::npos, warning);
      } else {
        BOOST_TEST(warning.empty(), "reported twice: " << warning);
      }
      const at::Tensor& grad = model.get("optional.scale").grad();
      BOOST_REQUIRE(grad.defined());
      BOOST_TEST(grad.abs().max().item<double>() == 0.0);
      BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, {tiny::input_for(0, step)}, false)) == 0.0);
    }
  }
}

BOOST_AUTO_TEST_CASE(no_sync_accumulates_then_reduces_the_sum) {
  for (const ReducerOptions& options : all_options()) {
    tiny::Model model = tiny::Model::make(7);
    GradientReducer reducer(*comm, model.params, options);
    std::vector<at::Tensor> inputs;
    for (int micro = 0; micro < 4; ++micro) inputs.push_back(tiny::input_for(0, micro));
    {
      NoSyncScope no_sync(reducer);
      for (int micro = 0; micro < 3; ++micro) {
        model.loss(inputs[micro]).backward();
        BOOST_TEST(reducer.finalize().empty());  // a no-op without sync
      }
    }
    BOOST_TEST(reducer.sync());
    model.loss(inputs[3]).backward();
    BOOST_TEST(reducer.finalize().empty());
    BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, inputs)) < 1e-6);
    BOOST_TEST(reducer.total_stats().steps == 1);
  }
}

BOOST_AUTO_TEST_CASE(second_backward_in_one_step_accumulates) {
  // Two backward calls before finalize: with tiny buckets and overlap, most buckets are launched
  // during the first, so the second's gradients take the late-gradient path.
  for (const ReducerOptions& options : all_options()) {
    tiny::Model model = tiny::Model::make(7);
    GradientReducer reducer(*comm, model.params, options);
    model.loss(tiny::input_for(0, 0)).backward();
    model.loss(tiny::input_for(0, 1)).backward();
    BOOST_TEST(reducer.finalize().empty());
    const auto expected = plain_grads(model, {tiny::input_for(0, 0), tiny::input_for(0, 1)});
    BOOST_TEST(tiny::max_difference(model.grads(), expected) < 1e-6);
    // The next step starts clean.
    model.zero_grads();
    model.loss(tiny::input_for(0, 2)).backward();
    BOOST_TEST(reducer.finalize().empty());
    BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, {tiny::input_for(0, 2)})) == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(half_precision_parameter_is_reduced_in_float32) {
  at::manual_seed(3);
  const at::Tensor weight = at::randn({8}).to(at::kBFloat16).set_requires_grad(true);
  GradientReducer reducer(*comm, {{"weight", weight}}, {});
  (weight.to(at::kFloat) * at::arange(8, at::TensorOptions().dtype(at::kFloat))).sum().backward();
  BOOST_TEST(reducer.finalize().empty());
  BOOST_TEST(weight.grad().scalar_type() == at::kBFloat16);
  BOOST_TEST(at::equal(weight.grad().to(at::kFloat), at::arange(8, at::TensorOptions().dtype(at::kFloat))));
}

BOOST_AUTO_TEST_CASE(finalize_without_backward_reduces_zeros) {
  tiny::Model model = tiny::Model::make(7);
  GradientReducer reducer(*comm, model.params, {});
  const std::string warning = reducer.finalize();
  BOOST_TEST(reducer.unused_parameters().size() == model.params.size());
  BOOST_TEST(warning.find("layer1.weight") != std::string::npos);
  BOOST_TEST(model.get("head.bias").grad().abs().max().item<double>() == 0.0);
}

BOOST_AUTO_TEST_CASE(zero_size_and_empty_parameter_lists) {
  const at::Tensor empty = at::zeros({0, 3}).set_requires_grad(true);
  const at::Tensor weight = at::ones({3}).set_requires_grad(true);
  GradientReducer reducer(*comm, {{"empty", empty}, {"weight", weight}}, {1, 1, true});
  ((empty.sum() + weight.sum()) * 2).backward();
  BOOST_TEST(reducer.finalize().empty());
  BOOST_TEST(at::equal(weight.grad(), at::full({3}, 2.0f)));
  BOOST_TEST(empty.grad().numel() == 0);

  GradientReducer nothing(*comm, {}, {});
  BOOST_TEST(nothing.finalize().empty());
  BOOST_TEST(nothing.buckets().empty());
}

BOOST_AUTO_TEST_CASE(invalid_parameters_are_rejected_by_name) {
  const at::Tensor leaf = at::ones({2}).set_requires_grad(true);
  const at::Tensor frozen = at::ones({2});
  const at::Tensor integer = at::ones({2}, at::TensorOptions().dtype(at::kLong));
  auto message_of = [&](hpctrain::ddp::NamedTensors params) -> std::string {
    try {
      GradientReducer reducer(*comm, std::move(params), {});
    } catch (const hpctrain::Error& error) {
      return error.what();
    }
    return "";
  };
  BOOST_TEST(message_of({{"frozen", frozen}}).find("'frozen'") != std::string::npos);
  BOOST_TEST(message_of({{"derived", leaf * 2}}).find("'derived'") != std::string::npos);
  BOOST_TEST(message_of({{"count", integer}}).find("'count'") != std::string::npos);
  BOOST_TEST(message_of({{"a", leaf}, {"tied", leaf}}).find("'tied' is registered twice") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sync_cannot_change_mid_step) {
  tiny::Model model = tiny::Model::make(7);
  GradientReducer reducer(*comm, model.params, {});
  model.loss(tiny::input_for(0)).backward();
  BOOST_CHECK_THROW(reducer.set_sync(false), hpctrain::Error);
  BOOST_TEST(reducer.finalize().empty());
  reducer.set_sync(false);
  BOOST_TEST(!reducer.sync());
}

BOOST_AUTO_TEST_CASE(destroyed_reducer_leaves_no_hooks) {
  tiny::Model model = tiny::Model::make(7);
  { GradientReducer reducer(*comm, model.params, {16, 64, true}); }
  model.loss(tiny::input_for(0)).backward();  // would crash in a dangling hook
  BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, {tiny::input_for(0)})) == 0.0);
}

BOOST_AUTO_TEST_CASE(moved_reducer_keeps_working) {
  tiny::Model model = tiny::Model::make(7);
  GradientReducer first(*comm, model.params, {16, 64, true});
  GradientReducer reducer = std::move(first);
  model.loss(tiny::input_for(0)).backward();
  BOOST_TEST(reducer.finalize().empty());
  BOOST_TEST(tiny::max_difference(model.grads(), plain_grads(model, {tiny::input_for(0)})) == 0.0);
}

BOOST_AUTO_TEST_SUITE_END()
