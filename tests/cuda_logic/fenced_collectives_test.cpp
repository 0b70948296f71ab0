// The copy-fence contract (Note [Fenced collectives] in src/ddp/gradient_reducer.cpp), observed through
// ReducerOptions::on_fence with a fake two-rank communicator: every collective the reducer issues is immediately
// preceded by a fence on the buffer it reads — dense buckets, the bf16 packing copy, late gradients, local SGD —
// and every reduction ends with a fence. On a GPU that fence waits for the queued device work; here it is
// observed only, which is what makes the contract testable in a build without CUDA.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "../ddp/tiny_model.hpp"
#include "fake_comm.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"

using hpctrain::ddp::GradientReducer;
using hpctrain::ddp::ReducerOptions;

namespace {

ReducerOptions observed_options(const std::shared_ptr<fake::Log>& log, hpctrain::dist::DType wire) {
  ReducerOptions options;
  options.first_bucket_bytes = 64;  // several buckets for the tiny model
  options.bucket_bytes = 512;
  options.wire_dtype = wire;
  options.on_fence = [log](const at::Tensor& buffer) { log->add("fence", buffer.data_ptr()); };
  return options;
}

// Every allreduce right after a fence on its own buffer; returns the number of allreduces.
std::size_t check_every_collective_fenced(const std::shared_ptr<fake::Log>& log) {
  const auto events = log->snapshot();
  std::size_t collectives = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].first != "allreduce") continue;
    ++collectives;
    BOOST_TEST_REQUIRE(i > 0, "the first event is an unfenced allreduce");
    BOOST_TEST(events[i - 1].first == "fence", "event " << i << ": allreduce after " << events[i - 1].first);
    BOOST_TEST(events[i - 1].second == events[i].second, "event " << i << ": fence on another buffer");
  }
  BOOST_TEST_REQUIRE(!events.empty());
  BOOST_TEST(events.back().first == "fence");  // the last reduction ended with a fence
  return collectives;
}

void run_fenced_step(hpctrain::dist::DType wire, bool twice) {
  tiny::Model model = tiny::Model::make(7);
  fake::TwoRankComm comm;
  const auto& log = comm.log();
  GradientReducer reducer(comm, model.params, observed_options(log, wire));
  BOOST_TEST_REQUIRE(reducer.buckets().size() > 2);
  const std::vector<at::Tensor> expected = tiny::replica_grads(model, twice ? std::vector<at::Tensor>{tiny::input_for(0),
                                                                                                      tiny::input_for(1)}
                                                                            : std::vector<at::Tensor>{tiny::input_for(0)});
  model.loss(tiny::input_for(0)).backward();
  if (twice) model.loss(tiny::input_for(1)).backward();  // late gradients: the second backward's hooks
  (void)reducer.finalize();
  const std::size_t collectives = check_every_collective_fenced(log);
  BOOST_TEST(collectives >= reducer.buckets().size());
  if (twice) BOOST_TEST(collectives > reducer.buckets().size());  // the late gradients were reduced once more
  const double tolerance = wire == hpctrain::dist::DType::bf16 ? 2e-2 : 1e-6;
  BOOST_TEST(tiny::max_difference(model.grads(), expected) < tolerance);  // the other rank has the same gradients
}

}  // namespace

BOOST_AUTO_TEST_SUITE(fenced_collectives)

BOOST_AUTO_TEST_CASE(dense_buckets_are_fenced) { run_fenced_step(hpctrain::dist::DType::f32, false); }

BOOST_AUTO_TEST_CASE(bf16_packing_copy_is_fenced) { run_fenced_step(hpctrain::dist::DType::bf16, false); }

BOOST_AUTO_TEST_CASE(late_gradient_buffers_are_fenced) {
  run_fenced_step(hpctrain::dist::DType::f32, true);
  run_fenced_step(hpctrain::dist::DType::bf16, true);
}

BOOST_AUTO_TEST_CASE(local_sgd_parameter_averages_are_fenced) {
  tiny::Model model = tiny::Model::make(8);
  fake::TwoRankComm comm;
  GradientReducer reducer(comm, model.params, observed_options(comm.log(), hpctrain::dist::DType::f32));
  const at::Tensor before = model.get("layer2.weight").detach().clone();
  reducer.average_parameters();
  BOOST_TEST(check_every_collective_fenced(comm.log()) == reducer.buckets().size());
  BOOST_TEST(at::allclose(model.get("layer2.weight"), before));  // the average of two equal replicas
}

BOOST_AUTO_TEST_SUITE_END()
