// broadcast_parameters, check_same_structure and find_unsynchronized on two ranks.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "harness.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "tiny_model.hpp"

namespace mpi_test {
namespace {

// Parameters and buffers of every kind broadcast_parameters must carry, filled from `seed`.
hpctrain::ddp::NamedTensors make_state(uint64_t seed) {
  at::manual_seed(seed);
  const at::Tensor transposed_base = at::randn({6, 5});
  return {
      {"weight", at::randn({7, 3}).set_requires_grad(true)},
      {"bias64", at::randn({5}, at::TensorOptions().dtype(at::kDouble)).set_requires_grad(true)},
      {"position_ids", at::arange(10, at::TensorOptions().dtype(at::kLong)) * static_cast<int64_t>(seed)},
      {"mask", at::rand({9}) > 0.5},
      {"empty", at::zeros({0, 4})},
      {"transposed", transposed_base.t()},  // non-contiguous: written through the view
      {"large", at::randn({17 << 20})},     // 68 MiB: more than one broadcast buffer, sent alone
      {"after_large", at::randn({4, 4}, at::TensorOptions().dtype(at::kHalf))},
  };
}

std::vector<at::Tensor> tensors_of(const hpctrain::ddp::NamedTensors& named) {
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  return tensors;
}

// The message check_same_structure throws on this rank, or "" when it does not throw.
std::string structure_error(hpctrain::dist::Comm& comm, const hpctrain::ddp::NamedTensors& named) {
  try {
    hpctrain::ddp::check_same_structure(comm, named);
  } catch (const hpctrain::Error& error) {
    return error.what();
  }
  return "";
}

void expect_structure_error(hpctrain::dist::Comm& comm, const hpctrain::ddp::NamedTensors& named,
                            const std::vector<std::string>& expected_parts) {
  const std::string message = structure_error(comm, named);
  EXPECT(!message.empty(), "rank {}: check_same_structure did not throw", comm.rank());
  for (const std::string& part : expected_parts) {
    EXPECT(message.find(part) != std::string::npos, "rank {}: message lacks '{}': {}", comm.rank(), part, message);
  }
  // Both ranks throw the same message.
  const std::string from_rank0 = [&] {
    std::string text = message;
    comm.broadcast_string(text, 0);
    return text;
  }();
  EXPECT(from_rank0 == message, "rank {} threw '{}' but rank 0 threw '{}'", comm.rank(), message, from_rank0);
}

}  // namespace

void broadcast(hpctrain::dist::Comm& comm) {
  hpctrain::ddp::NamedTensors state = make_state(comm.rank() == 0 ? 100 : 200);
  const std::string before = hpctrain::ddp::find_unsynchronized(comm, state);
  EXPECT(before == "weight", "before the broadcast the first differing tensor is 'weight', got '{}'", before);

  hpctrain::ddp::broadcast_parameters(comm, tensors_of(state), 0);
  const hpctrain::ddp::NamedTensors reference = make_state(100);
  for (std::size_t i = 0; i < state.size(); ++i) {
    EXPECT(at::equal(state[i].second, reference[i].second), "rank {}: '{}' differs from rank 0's after the broadcast",
          comm.rank(), state[i].first);
  }
  const std::string after = hpctrain::ddp::find_unsynchronized(comm, state);
  EXPECT(after.empty(), "after the broadcast '{}' still differs", after);

  // A different tensor count is an error on both ranks, not a hang.
  std::vector<at::Tensor> tensors = tensors_of(state);
  if (comm.rank() == 1) tensors.pop_back();
  bool threw = false;
  try {
    hpctrain::ddp::broadcast_parameters(comm, tensors, 0);
  } catch (const hpctrain::Error&) {
    threw = true;
  }
  EXPECT(threw, "rank {}: broadcast of different tensor lists did not throw", comm.rank());
}

void structure_and_sync_checks(hpctrain::dist::Comm& comm) {
  const bool is_rank1 = comm.rank() == 1;
  const tiny::Model model = tiny::Model::make(7);
  EXPECT(structure_error(comm, model.params).empty(), "identical models must pass");

  hpctrain::ddp::NamedTensors named = model.clone().params;
  if (is_rank1) named[2].second = at::zeros({16, 17});
  expect_structure_error(comm, named, {"layer2.weight", "[16, 16]", "[16, 17]", "rank 1"});

  named = model.clone().params;
  if (is_rank1) named[5].first = "head.b";
  expect_structure_error(comm, named, {"'head.bias'", "'head.b'"});

  named = model.clone().params;
  if (is_rank1) named[0].second = named[0].second.to(at::kDouble);
  expect_structure_error(comm, named, {"layer1.weight", "Double", "Float"});

  named = model.clone().params;
  if (is_rank1) named.emplace_back("extra", at::zeros({2}));
  expect_structure_error(comm, named, {"rank 0 has 6 tensors, rank 1 has 7", "'extra'"});

  // find_unsynchronized names the first tensor that differs, on both ranks.
  tiny::Model replica = model.clone();
  EXPECT(hpctrain::ddp::find_unsynchronized(comm, replica.params).empty(), "identical replicas");
  {
    at::NoGradGuard no_grad;
    if (is_rank1) {
      replica.get("layer2.weight")[3][4].add_(1e-6);
      replica.get("head.weight")[0][0].add_(1.0);
    }
  }
  const std::string differing = hpctrain::ddp::find_unsynchronized(comm, replica.params);
  EXPECT(differing == "layer2.weight", "rank {}: expected 'layer2.weight', got '{}'", comm.rank(), differing);
}

}  // namespace mpi_test
