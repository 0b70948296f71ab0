// ZeroOptimizer (zero_optimizer.hpp): the sharded optimizer of --zero-stage 1 and 2.
#include "hpctrain/train/zero_optimizer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "hpctrain/core/error.hpp"

// Note [ZeRO checkpoints]
// optimizer.safetensors is world-size-free: a ZeRO run writes exactly stage 0's tensors (names, shapes,
// dtypes, values), so any checkpoint resumes at any stage and world size. It works because a segment's state
// is the matching part of its parameter's state (Note [ZeRO slices]): a per-element tensor (moments, 8-bit
// codes, momentum) of rank r's segment is elements [begin, end) of the whole one, a per-block tensor (8-bit
// absmax) is whole blocks, and a 0-dim tensor (SGD's per-parameter step) is the same on every rank. The
// inner optimizer holds every parameter, with an empty segment where this rank owns nothing, so every rank
// has the same state names. At construction the ranks exchange each state tensor's numel once; the whole
// tensor is the concatenation in rank order, shaped as the parameter when it has its numel, else 1-D.
// Saving: gather_state() gathers one tensor at a time (an all-gather padded to the largest piece: the
// communicator has no gather-v), rank 0 keeps the whole state and writes the file as stage 0 does. Memory:
// rank 0 holds the whole optimizer state (stage 0's size) while it writes; the other ranks one tensor. The
// alternative, per-rank files plus an index, would keep every rank at its shard but make every reader
// re-slice and was not measured (docs/zero.md). Loading: rank 0 reads and checks the file against
// state_layout() (the whole shapes), every rank receives it whole (as stage 0) and keeps its slices.
namespace hpctrain::train {
namespace {

std::vector<optim::ParameterGroup> group_skeletons(const std::vector<optim::ParameterGroup>& groups) {
  std::vector<optim::ParameterGroup> out;
  for (const optim::ParameterGroup& group : groups) out.push_back({group.name, group.weight_decay, {}});
  return out;
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(dist::Comm& comm, ddp::GradientReducer& reducer, std::vector<optim::ParameterGroup> groups,
                             const SegmentOptimizerFactory& make)
    : Optimizer(groups), comm_(comm), reducer_(reducer) {
  HPCTRAIN_CHECK(reducer.zero_stage() > 0, "ZeroOptimizer: the gradient reducer has no ZeRO stage (enable_zero first)");
  std::unordered_map<const void*, std::size_t> reduced;
  const std::vector<at::Tensor> reduced_parameters = reducer.parameters();
  for (std::size_t i = 0; i < reduced_parameters.size(); ++i) reduced.emplace(reduced_parameters[i].unsafeGetTensorImpl(), i);
  std::vector<optim::ParameterGroup> segment_groups = group_skeletons(groups);
  std::vector<int64_t> full_numels;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const auto& [name, tensor] : groups[g].parameters) {
      HPCTRAIN_CHECK(tensor.is_contiguous(), "--zero-stage: parameter '{}' is not contiguous", name);
      Piece piece;
      piece.name = name;
      piece.full_shape = tensor.sizes().vec();
      const at::Tensor flat = tensor.detach().view({-1});
      const auto found = reduced.find(tensor.unsafeGetTensorImpl());
      if (found != reduced.end()) {
        const ddp::GradientReducer::Shard& shard = reducer.shards()[found->second];
        piece.reduced = true;
        piece.bucket = shard.bucket;
        piece.slice_offset = shard.segment.slice_offset;
        piece.segment = flat.narrow(0, shard.segment.begin, shard.segment.numel());
      } else {  // never has a gradient: rank 0 keeps its (unchanging) state
        piece.segment = flat.narrow(0, 0, comm.rank() == 0 ? flat.numel() : 0);
      }
      segment_groups[g].parameters.emplace_back(name, piece.segment);
      full_numels.push_back(tensor.numel());
      pieces_.push_back(std::move(piece));
    }
  }
  inner_ = make(std::move(segment_groups), full_numels);
  // Note [ZeRO checkpoints]: every rank's numel of every state tensor, once.
  const optim::OptimizerState mine = state_tensors();
  std::vector<int64_t> numels;
  for (const auto& [name, tensor] : mine) numels.push_back(tensor.numel());
  std::vector<int64_t> all(numels.size() * static_cast<std::size_t>(comm.world_size()));
  comm.allgather(numels.data(), numels.size() * sizeof(int64_t), all.data());
  std::size_t k = 0;
  for (const auto& [name, tensor] : mine) {
    std::vector<int64_t>& per_rank = piece_numels_[name];
    for (int r = 0; r < comm.world_size(); ++r) per_rank.push_back(all[static_cast<std::size_t>(r) * numels.size() + k]);
    ++k;
    shapes_[name] = tensor.dim() == 0 ? std::vector<int64_t>{}
                                      : full_shape(name, std::accumulate(per_rank.begin(), per_rank.end(), int64_t{0}));
  }
}

// The parameter's shape when the whole tensor has the parameter's numel (per-element state), else 1-D.
std::vector<int64_t> ZeroOptimizer::full_shape(const std::string& state_name, int64_t total) const {
  const std::string parameter = state_name.substr(state_name.find('.') + 1);
  for (const Piece& piece : pieces_) {
    if (piece.name != parameter) continue;
    const int64_t numel = std::accumulate(piece.full_shape.begin(), piece.full_shape.end(), int64_t{1}, std::multiplies<>());
    if (numel == total) return piece.full_shape;
  }
  return {total};
}

optim::OptimizerState ZeroOptimizer::state_tensors() const {
  optim::OptimizerState state = inner_->state_dict();
  state.erase("step");
  return state;
}

optim::OptimizerState ZeroOptimizer::state_layout() const {
  optim::OptimizerState layout;
  for (const auto& [name, tensor] : state_tensors())
    layout[name] = at::empty(shapes_.at(name), tensor.options().device(at::kMeta));
  layout["step"] = at::scalar_tensor(steps(), at::kLong);
  return layout;
}

int64_t ZeroOptimizer::whole_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : state_tensors()) {
    const std::vector<int64_t>& shape = shapes_.at(name);
    bytes += std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()) * tensor.element_size();
  }
  return bytes;
}

optim::OptimizerState ZeroOptimizer::gather_state() const {
  optim::OptimizerState whole;
  const auto rank = static_cast<std::size_t>(comm_.rank());
  for (const auto& [name, tensor] : state_tensors()) {
    const at::Tensor mine = tensor.detach().to(at::kCPU).contiguous().view({-1});
    if (tensor.dim() == 0) {  // the same on every rank
      if (rank == 0) whole[name] = mine.view({}).clone();
      continue;
    }
    const std::vector<int64_t>& numels = piece_numels_.at(name);
    const int64_t longest = *std::max_element(numels.begin(), numels.end());
    at::Tensor padded = at::zeros({longest}, mine.options());
    padded.narrow(0, 0, mine.numel()).copy_(mine);
    at::Tensor all = at::empty({longest * comm_.world_size()}, mine.options());
    comm_.allgather(padded.data_ptr(), padded.nbytes(), all.data_ptr());
    if (rank != 0) continue;
    std::vector<at::Tensor> pieces;
    for (std::size_t r = 0; r < numels.size(); ++r)
      pieces.push_back(all.narrow(0, static_cast<int64_t>(r) * longest, numels[r]));
    whole[name] = at::cat(pieces).view(shapes_.at(name));
  }
  if (rank == 0) whole["step"] = at::scalar_tensor(steps(), at::kLong);
  return whole;
}

void ZeroOptimizer::copy_state(const optim::OptimizerState& state) {
  optim::OptimizerState mine;
  const auto rank = static_cast<std::size_t>(comm_.rank());
  for (const auto& [name, tensor] : state_tensors()) {
    const at::Tensor& whole = state.at(name);
    if (tensor.dim() == 0) {
      mine[name] = whole;
      continue;
    }
    const std::vector<int64_t>& numels = piece_numels_.at(name);
    const int64_t offset = std::accumulate(numels.begin(), numels.begin() + static_cast<std::ptrdiff_t>(rank), int64_t{0});
    mine[name] = whole.reshape({-1}).narrow(0, offset, numels[rank]).view(tensor.sizes());
  }
  mine["step"] = state.at("step");
  inner_->load_state_dict(mine);
}

double ZeroOptimizer::unscaled_sum_of_squares(double factor) {
  at::NoGradGuard no_grad;
  double local = 0;
  for (const at::Tensor& slice : reducer_.gradient_slices()) {
    if (factor != 1.0) slice.mul_(factor);
    local += slice.to(at::kDouble).square().sum().item<double>();
  }
  return comm_.allreduce_value(local);
}

void ZeroOptimizer::scale_gradients(double factor) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& slice : reducer_.gradient_slices()) slice.mul_(factor);
}

void ZeroOptimizer::update(double lr) {
  const std::vector<at::Tensor> slices = reducer_.gradient_slices();
  for (Piece& piece : pieces_) {
    if (!piece.reduced) continue;
    at::Tensor grad = slices[piece.bucket].narrow(0, piece.slice_offset, piece.segment.numel());
    if (grad.device() != piece.segment.device() || grad.scalar_type() != piece.segment.scalar_type())
      grad = grad.to(piece.segment.device(), piece.segment.scalar_type());
    piece.segment.mutable_grad() = grad;
  }
  inner_->step(lr);
  for (Piece& piece : pieces_) piece.segment.mutable_grad() = at::Tensor();
  reducer_.allgather_parameters();
}

}  // namespace hpctrain::train
