// ddp::ShardedParameters with the single-process communicator (Note [Sharded parameters]): the parameters keep
// their values through sharding, hold no memory while released, and autograd's saved views read the values
// gathered again before backward (the gradients equal those of unsharded twins, and no version-counter error).
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "hpctrain/ddp/sharded_parameters.hpp"
#include "tiny_model.hpp"

using hpctrain::ddp::ShardedParameters;

namespace {

// Units: layer1 (two parameters), layer2 + optional.scale, the head (float32 weight, float64 bias: two groups).
std::vector<ShardedParameters::Unit> units_of(const tiny::Model& model) {
  const auto& p = model.params;
  return {{"layer1", {p[0], p[1]}}, {"layer2", {p[2], p[3]}}, {"head", {p[4], p[5]}}};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(sharded_parameters)

BOOST_AUTO_TEST_CASE(released_parameters_hold_no_memory_and_gather_back) {
  tiny::Model model = tiny::Model::make(11);
  const tiny::Model before = model.clone();
  const auto comm = hpctrain::dist::make_single_process_comm();
  ShardedParameters sharded(*comm, units_of(model), [](int64_t) { return 1; });
  BOOST_TEST(sharded.num_units() == 3u);
  BOOST_TEST(sharded.groups().size() == 4u);  // the head's float64 bias is a group of its own
  for (const auto& [name, param] : model.params) BOOST_TEST(param.storage().nbytes() == 0u, name);
  BOOST_TEST(sharded.shard_bytes() > 0);
  for (std::size_t unit = 0; unit < sharded.num_units(); ++unit) sharded.gather(unit);
  for (std::size_t i = 0; i < model.params.size(); ++i)
    BOOST_TEST(at::equal(model.params[i].second, before.params[i].second), model.params[i].first);
  sharded.release(0);
  BOOST_TEST(model.params[0].second.storage().nbytes() == 0u);
  BOOST_TEST(model.params[2].second.storage().nbytes() > 0u);  // another unit stays gathered
  sharded.release_all();
  BOOST_TEST(!sharded.gathered(1));
}

BOOST_AUTO_TEST_CASE(backward_after_release_and_gather_equals_the_unsharded_gradients) {
  tiny::Model model = tiny::Model::make(11);
  const tiny::Model reference = model.clone();
  const auto comm = hpctrain::dist::make_single_process_comm();
  ShardedParameters sharded(*comm, units_of(model), [](int64_t) { return 1; });
  for (std::size_t unit = 0; unit < sharded.num_units(); ++unit) sharded.gather(unit);
  const at::Tensor input = tiny::input_for(3);
  const at::Tensor loss = model.loss(input);
  sharded.release_all();  // as after each unit's forward: autograd's saved views lose their memory
  for (std::size_t unit = 0; unit < sharded.num_units(); ++unit) sharded.gather(unit);  // before backward
  loss.backward();
  BOOST_TEST(tiny::max_difference(model.grads(), tiny::replica_grads(reference, {input})) < 1e-12);
}

BOOST_AUTO_TEST_CASE(kept_values_become_the_shards) {
  tiny::Model model = tiny::Model::make(11);
  const auto comm = hpctrain::dist::make_single_process_comm();
  ShardedParameters sharded(*comm, units_of(model), [](int64_t) { return 1; });
  sharded.gather(1);
  {
    at::NoGradGuard no_grad;
    model.params[2].second.fill_(0.25);  // a checkpoint's values, written into the gathered unit
  }
  sharded.keep_gathered_values();
  sharded.release_all();
  sharded.gather(1);
  BOOST_TEST(at::equal(model.params[2].second, at::full_like(model.params[2].second, 0.25)));
  const at::Tensor segment = sharded.segment(2);  // one rank owns the whole parameter
  BOOST_TEST(at::equal(segment, at::full({segment.numel()}, 0.25)));
}

BOOST_AUTO_TEST_SUITE_END()
