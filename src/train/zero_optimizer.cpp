// ZeroOptimizer (zero_optimizer.hpp): the sharded optimizer of --zero-stage 1, 2 and 3; reducer_shards, where
// stages 1 and 2 keep the slices.
#include "hpctrain/train/zero_optimizer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <numeric>
#include <unordered_map>

#include "hpctrain/core/error.hpp"
#include "sum_of_squares.hpp"

// Note [ZeRO checkpoints]
// optimizer.safetensors is world-size-free: a ZeRO run writes exactly stage 0's tensors (names, shapes,
// dtypes, values), so any checkpoint resumes at any stage and world size. It works because a segment's state
// is the matching part of its parameter's state (Note [ZeRO slices]): a per-element tensor (moments, 8-bit
// codes, momentum) of rank r's segment is elements [begin, end) of the whole one, a per-block tensor (8-bit
// absmax) is whole blocks, and a 0-dim tensor (SGD's per-parameter step) is the same on every rank. The
// inner optimizer holds every parameter, with an empty segment where this rank owns nothing, so every rank
// has the same state names. At construction the ranks exchange each state tensor's numel once; the whole
// tensor is the concatenation in rank order, shaped as the parameter when it has its numel, else 1-D.
// Saving: gather_state_tensor() gathers one tensor (an all-gather padded to the largest piece: the
// communicator has no gather-v) and rank 0 writes it into the file before the next is gathered (Note [Streamed
// writes]: Accelerator::save_state), so no rank holds more than one whole state tensor beside its shard; the
// file's bytes are stage 0's. gather_state() (every tensor at once on rank 0) is for tests. Loading: rank 0 reads and checks the file against
// state_layout() (the whole shapes), every rank receives it whole (as stage 0) and keeps its slices.
namespace hpctrain::train {
namespace {

// Stages 1 and 2: segments are views into the parameters, as the reducer's ZeRO buckets lay them out.
class ReducerShards final : public ZeroShards {
 public:
  ReducerShards(dist::Comm& comm, ddp::GradientReducer& reducer) : comm_(comm), reducer_(reducer) {
    HPCTRAIN_CHECK(reducer.zero_stage() > 0, "ZeroOptimizer: the gradient reducer has no ZeRO stage (enable_zero first)");
    const std::vector<at::Tensor> reduced = reducer_.parameters();
    for (std::size_t i = 0; i < reduced.size(); ++i) index_.emplace(reduced[i].unsafeGetTensorImpl(), i);
  }

  Segment segment(const std::string& name, const at::Tensor& param) const override {
    HPCTRAIN_CHECK(param.is_contiguous(), "--zero-stage: parameter '{}' is not contiguous", name);
    const at::Tensor flat = param.detach().view({-1});
    Segment out;
    const auto found = index_.find(param.unsafeGetTensorImpl());
    if (found == index_.end()) {  // never has a gradient: rank 0 keeps its (unchanging) state
      out.values = flat.narrow(0, 0, comm_.rank() == 0 ? flat.numel() : 0);
      return out;
    }
    const ddp::GradientReducer::Shard& shard = reducer_.shards()[found->second];
    out.reduced = true;
    out.bucket = shard.bucket;
    out.slice_offset = shard.segment.slice_offset;
    out.values = flat.narrow(0, shard.segment.begin, shard.segment.numel());
    return out;
  }
  std::size_t buckets() const override { return reducer_.buckets().size(); }
  std::vector<at::Tensor> gradient_slices() const override { return reducer_.gradient_slices(); }
  void bucket_updated(std::size_t bucket) override { reducer_.start_parameter_allgather(bucket); }
  void wait_updates() override { reducer_.wait_parameter_allgathers(); }

 private:
  dist::Comm& comm_;
  ddp::GradientReducer& reducer_;
  std::unordered_map<const void*, std::size_t> index_;  // reduced parameter -> registration index
};

}  // namespace

std::unique_ptr<ZeroShards> reducer_shards(dist::Comm& comm, ddp::GradientReducer& reducer) {
  return std::make_unique<ReducerShards>(comm, reducer);
}

ZeroOptimizer::ZeroOptimizer(dist::Comm& comm, ZeroShards& shards, std::vector<optim::ParameterGroup> groups,
                             const SegmentOptimizerFactory& make)
    : Optimizer(groups), comm_(comm), shards_(shards) {
  make_pieces(groups);
  // One inner optimizer per bucket (and one for parameters without gradients), so that a bucket's all-gather
  // runs while the next bucket is updated (Note [ZeRO gradient reduction]).
  const std::size_t parts = shards.buckets() + 1;
  for (std::size_t part = 0; part < parts; ++part) {
    std::vector<optim::ParameterGroup> segment_groups;
    std::vector<int64_t> full_numels;
    std::size_t k = 0;
    for (const optim::ParameterGroup& group : groups) {
      optim::ParameterGroup segments{group.name, group.weight_decay, {}};
      for (std::size_t i = 0; i < group.parameters.size(); ++i, ++k) {
        if (part_of(pieces_[k]) != part) continue;
        segments.parameters.emplace_back(pieces_[k].name, pieces_[k].segment);
        full_numels.push_back(group.parameters[i].second.numel());
      }
      if (!segments.parameters.empty()) segment_groups.push_back(std::move(segments));
    }
    inners_.push_back(segment_groups.empty() ? nullptr : make(std::move(segment_groups), full_numels));
  }
  HPCTRAIN_CHECK(!pieces_.empty(), "ZeroOptimizer: no parameters");
  exchange_layout();
}

// This rank's segment of every parameter, in group order.
void ZeroOptimizer::make_pieces(const std::vector<optim::ParameterGroup>& groups) {
  for (const optim::ParameterGroup& group : groups) {
    for (const auto& [name, tensor] : group.parameters) {
      const ZeroShards::Segment segment = shards_.segment(name, tensor);
      Piece piece;
      piece.name = name;
      piece.full_shape = tensor.sizes().vec();
      piece.segment = segment.values;
      piece.reduced = segment.reduced;
      piece.bucket = segment.bucket;
      piece.slice_offset = segment.slice_offset;
      pieces_.push_back(std::move(piece));
    }
  }
}

std::size_t ZeroOptimizer::part_of(const Piece& piece) const {
  return piece.reduced ? piece.bucket : shards_.buckets();
}

// Note [ZeRO checkpoints]: every rank's numel of every state tensor, once.
void ZeroOptimizer::exchange_layout() {
  const optim::OptimizerState mine = state_tensors();
  std::vector<int64_t> numels;
  for (const auto& [name, tensor] : mine) numels.push_back(tensor.numel());
  std::vector<int64_t> all(numels.size() * static_cast<std::size_t>(comm_.world_size()));
  comm_.allgather(numels.data(), numels.size() * sizeof(int64_t), all.data());
  std::size_t k = 0;
  for (const auto& [name, tensor] : mine) {
    std::vector<int64_t>& per_rank = piece_numels_[name];
    for (int r = 0; r < comm_.world_size(); ++r) per_rank.push_back(all[static_cast<std::size_t>(r) * numels.size() + k]);
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
  optim::OptimizerState state;
  for (const auto& inner : inners_) {
    if (!inner) continue;
    optim::OptimizerState part = inner->state_dict();
    part.erase("step");
    state.insert(part.begin(), part.end());
  }
  return state;
}

const optim::Optimizer& ZeroOptimizer::first_inner() const {
  for (const auto& inner : inners_)
    if (inner) return *inner;
  fail("ZeroOptimizer: no inner optimizer");
}

int64_t ZeroOptimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& inner : inners_) bytes += inner ? inner->state_bytes() : 0;
  return bytes;
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
  for (const auto& [name, layout] : state_layout()) {
    at::Tensor tensor = gather_state_tensor(name);
    if (comm_.rank() == 0) whole[name] = std::move(tensor);
  }
  return whole;
}

at::Tensor ZeroOptimizer::gather_state_tensor(const std::string& name) const {
  const bool root = comm_.rank() == 0;
  if (name == "step") return root ? at::scalar_tensor(steps(), at::kLong) : at::Tensor();
  const optim::OptimizerState mine_all = state_tensors();
  const auto found = mine_all.find(name);
  HPCTRAIN_CHECK(found != mine_all.end(), "ZeroOptimizer: no state tensor '{}'", name);
  const at::Tensor mine = found->second.detach().to(at::kCPU).contiguous().view({-1});
  if (found->second.dim() == 0) return root ? mine.view({}).clone() : at::Tensor();  // the same on every rank
  const std::vector<int64_t>& numels = piece_numels_.at(name);
  const int64_t longest = *std::max_element(numels.begin(), numels.end());
  at::Tensor padded = at::zeros({longest}, mine.options());
  padded.narrow(0, 0, mine.numel()).copy_(mine);
  at::Tensor all = at::empty({longest * comm_.world_size()}, mine.options());
  comm_.allgather(padded.data_ptr(), padded.nbytes(), all.data_ptr());
  if (!root) return {};
  std::vector<at::Tensor> pieces;
  for (std::size_t r = 0; r < numels.size(); ++r)
    pieces.push_back(all.narrow(0, static_cast<int64_t>(r) * longest, numels[r]));
  return at::cat(pieces).view(shapes_.at(name));
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
  for (const auto& inner : inners_) {
    if (!inner) continue;
    optim::OptimizerState part;
    for (const auto& [name, tensor] : inner->state_dict()) part[name] = name == "step" ? state.at("step") : mine.at(name);
    inner->load_state_dict(part);
  }
}

double ZeroOptimizer::unscaled_sum_of_squares(double factor) {
  at::NoGradGuard no_grad;
  at::Tensor squares;  // float64 (Note [Gradient norm in float64]): only an inf or NaN element makes it non-finite
  for (const at::Tensor& slice : shards_.gradient_slices()) {
    if (factor != 1.0) slice.mul_(factor);
    detail::add_sum_of_squares(squares, slice);
  }
  return comm_.allreduce_value(squares.defined() ? squares.item<double>() : 0.0);  // one read-back
}

void ZeroOptimizer::scale_gradients(double factor) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& slice : shards_.gradient_slices()) slice.mul_(factor);
}

// Bucket by bucket: update this rank's segments, then start that bucket's all-gather, which runs on the
// communication thread while the next bucket is updated (Note [ZeRO gradient reduction]); every rank goes
// through the buckets in the same order.
void ZeroOptimizer::update(double lr) {
  const std::vector<at::Tensor> slices = shards_.gradient_slices();
  for (Piece& piece : pieces_) {
    if (!piece.reduced) continue;
    at::Tensor grad = slices[piece.bucket].narrow(0, piece.slice_offset, piece.segment.numel());
    if (grad.device() != piece.segment.device() || grad.scalar_type() != piece.segment.scalar_type())
      grad = grad.to(piece.segment.device(), piece.segment.scalar_type());
    piece.segment.mutable_grad() = grad;
  }
  // Parameters without gradients first (nothing to gather), then the buckets from the last: the last holds the
  // first layers and, in language models, the embedding, usually the largest; the all-gather of the bucket
  // updated last is the one nothing overlaps.
  for (std::size_t part = inners_.size(); part-- > 0;) {
    if (inners_[part]) inners_[part]->step(lr);
    if (part < slices.size()) shards_.bucket_updated(part);
  }
  for (Piece& piece : pieces_) piece.segment.mutable_grad() = at::Tensor();
  shards_.wait_updates();
}

}  // namespace hpctrain::train
