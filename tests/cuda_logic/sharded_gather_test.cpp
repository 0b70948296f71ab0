// ZeRO-3's parameter all-gathers (Note [Sharded parameters] in src/ddp/sharded_parameters.cpp) keep the copy-fence
// contract of Note [Fenced collectives]: with the fake two-rank communicator every all-gather is immediately
// preceded by a fence on the buffer it reads and followed by one, and the gathered values are both ranks' blocks.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "fake_comm.hpp"
#include "hpctrain/ddp/sharded_parameters.hpp"

BOOST_AUTO_TEST_SUITE(sharded_gather)

BOOST_AUTO_TEST_CASE(every_all_gather_is_fenced_on_its_buffer) {
  fake::TwoRankComm comm;
  const auto& log = comm.log();
  at::manual_seed(3);
  const at::Tensor weight = at::randn({5, 3}).set_requires_grad(true), bias = at::randn({5}).set_requires_grad(true);
  const at::Tensor original = at::cat({weight.detach().reshape(-1), bias.detach()});
  hpctrain::ddp::ShardedParametersOptions options;
  options.on_fence = [log](const at::Tensor& buffer) { log->add("fence", buffer.data_ptr()); };
  hpctrain::ddp::ShardedParameters sharded(comm, {{"layer", {{"weight", weight}, {"bias", bias}}}},
                                           [](int64_t) { return 1; }, options);
  sharded.gather(0);
  const auto events = log->snapshot();
  std::size_t gathers = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].first != "allgather") continue;
    ++gathers;
    BOOST_TEST_REQUIRE(i > 0);
    BOOST_TEST(events[i - 1].first == "fence");
    BOOST_TEST(events[i - 1].second == events[i].second);  // on its own buffer
    BOOST_TEST_REQUIRE(i + 1 < events.size());
    BOOST_TEST(events[i + 1].first == "fence");
  }
  BOOST_TEST(gathers == 1u);
  // 20 elements over 2 ranks: this rank (0) owns the first 10; the fake's rank 1 holds the same block.
  const at::Tensor gathered = at::cat({weight.detach().reshape(-1), bias.detach()});
  BOOST_TEST(at::equal(gathered.narrow(0, 0, 10), original.narrow(0, 0, 10)));
  BOOST_TEST(at::equal(gathered.narrow(0, 10, 10), original.narrow(0, 0, 10)));
}

BOOST_AUTO_TEST_SUITE_END()
