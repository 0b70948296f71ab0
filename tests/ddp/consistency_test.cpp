// Replica-consistency helpers with one process: identities that must not disturb the tensors.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "tiny_model.hpp"

BOOST_AUTO_TEST_SUITE(consistency)

BOOST_AUTO_TEST_CASE(single_process_is_always_consistent) {
  auto comm = hpctrain::dist::make_single_process_comm();
  tiny::Model model = tiny::Model::make(7);
  const tiny::Model before = model.clone();
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : model.params) tensors.push_back(tensor);
  hpctrain::ddp::broadcast_parameters(*comm, tensors);
  hpctrain::ddp::check_same_structure(*comm, model.params);
  BOOST_TEST(hpctrain::ddp::find_unsynchronized(*comm, model.params).empty());
  for (std::size_t i = 0; i < tensors.size(); ++i) BOOST_TEST(at::equal(tensors[i], before.params[i].second));
}

BOOST_AUTO_TEST_CASE(mismatched_lists_are_rejected) {
  auto comm = hpctrain::dist::make_single_process_comm();
  BOOST_CHECK_THROW(hpctrain::ddp::check_same_structure(*comm, {"a", "b"}, {{1}}, {at::kFloat}), hpctrain::Error);
  BOOST_CHECK_THROW(hpctrain::ddp::broadcast_parameters(*comm, {}, 1), hpctrain::Error);
}

BOOST_AUTO_TEST_SUITE_END()
