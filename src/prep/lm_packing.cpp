// `prep lm`: a document's ids, the packing of documents into rows and the plan of splits and positions.
#include "lm_packing.hpp"

#include <deque>
#include <map>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"

namespace hpctrain::prep::detail {

namespace {

// Row k (in the order made) of split s goes to position_of[k]: the inverse of a seeded shuffle of 0..rows-1 (as
// place_rows does).
std::vector<uint32_t> shuffled_positions(const LmPlan& plan, std::size_t s, uint64_t seed) {
  HPCTRAIN_CHECK(plan.rows[s] < UINT32_MAX, "split '{}' would have {} rows; prep lm handles up to {} per split",
                 plan.documents.names[s], plan.rows[s], UINT32_MAX - 1);
  std::vector<uint32_t> order(static_cast<std::size_t>(plan.rows[s]));
  std::iota(order.begin(), order.end(), 0u);
  shuffle(order, derive_seed(seed, 3, s));
  std::vector<uint32_t> position_of(order.size());
  for (std::size_t position = 0; position < order.size(); ++position) position_of[order[position]] = static_cast<uint32_t>(position);
  return position_of;
}

}  // namespace

void end_with_eos(std::vector<int32_t>& ids, int32_t eos) {
  if (ids.empty() || ids.back() != eos) ids.push_back(eos);
}

RowPacker::RowPacker(int64_t block_size) : block_size_(block_size) {
  HPCTRAIN_CHECK(block_size > 0, "block size {}: expected at least 1 token per row", block_size);
  row_.reserve(static_cast<std::size_t>(block_size));
}

LmPlan plan_documents(const std::vector<std::vector<uint8_t>>& valid, double validation_fraction, uint64_t seed) {
  // A document is a row with the one "label" 0: plan_splits' stratified split is then a seeded split of the
  // documents, and its per-split shuffle places the rows of --packing none.
  std::vector<std::vector<int32_t>> labels(valid.size());
  for (std::size_t f = 0; f < valid.size(); ++f) {
    labels[f].resize(valid[f].size());
    for (std::size_t row = 0; row < valid[f].size(); ++row) labels[f][row] = valid[f][row] ? 0 : -1;
  }
  const std::vector<std::string> file_splits = {"train", "validation"};
  LmPlan plan;
  plan.documents = plan_splits(std::move(labels), file_splits, 1, validation_fraction, seed);
  return plan;
}

void plan_rows(LmPlan& plan, const std::vector<int64_t>& tokens, int64_t block_size, uint64_t seed) {
  const std::size_t splits = plan.documents.names.size();
  plan.row_position.clear();
  plan.rows = plan.documents.sizes;
  if (block_size <= 0) return;
  for (std::size_t s = 0; s < splits; ++s) {
    plan.rows[s] = tokens[s] / block_size;
    plan.row_position.push_back(shuffled_positions(plan, s, seed));  // of the k-th row cut, in input order
  }
}

Bins best_fit_decreasing(const std::vector<uint32_t>& lengths, uint32_t capacity) {
  HPCTRAIN_CHECK(lengths.size() < UINT32_MAX, "{} segments: best-fit-decreasing packs up to {}", lengths.size(), UINT32_MAX - 1);
  std::vector<uint32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return lengths[a] > lengths[b]; });
  // free space -> the rows with exactly that much room, in the order they came to have it (only spaces > 0).
  std::map<uint32_t, std::deque<uint32_t>> rows_with_space;
  std::vector<uint32_t> row_of(lengths.size());  // per segment
  std::vector<uint32_t> used;                    // per row: its tokens
  for (uint32_t segment : order) {
    const uint32_t length = lengths[segment];
    HPCTRAIN_CHECK(length >= 1 && length <= capacity, "segment {} has {} tokens: expected 1..{} (the row capacity)",
                   segment, length, capacity);
    uint32_t row = 0;
    const auto best = rows_with_space.lower_bound(length);
    if (best == rows_with_space.end()) {
      row = static_cast<uint32_t>(used.size());
      used.push_back(0);
    } else {
      row = best->second.front();
      best->second.pop_front();
      if (best->second.empty()) rows_with_space.erase(best);
    }
    row_of[segment] = row;
    used[row] += length;
    if (used[row] < capacity) rows_with_space[capacity - used[row]].push_back(row);
  }
  // A row's segments in the order placed: the sorted order, bucketed by row.
  Bins bins;
  bins.first.assign(used.size() + 1, 0);
  for (uint32_t segment : order) ++bins.first[row_of[segment] + 1];
  std::partial_sum(bins.first.begin(), bins.first.end(), bins.first.begin());
  std::vector<uint32_t> next(bins.first.begin(), bins.first.end() - 1);
  bins.segments.resize(lengths.size());
  for (uint32_t segment : order) bins.segments[next[row_of[segment]]++] = segment;
  return bins;
}

void plan_document_rows(LmPlan& plan, const std::vector<std::vector<uint32_t>>& lengths, int64_t capacity,
                        bool split_long, uint64_t seed) {
  HPCTRAIN_CHECK(capacity >= 1 && capacity < UINT32_MAX, "row capacity {}: expected 1..{} tokens", capacity, UINT32_MAX - 1);
  const std::size_t splits = plan.documents.names.size();
  plan.row_position.clear();
  plan.rows.assign(splits, 0);
  plan.segments.assign(splits, 0);
  plan.truncated.assign(splits, 0);
  plan.segment_position.assign(splits, {});
  plan.row_segments.assign(splits, {});
  for (std::size_t s = 0; s < splits; ++s) {
    std::vector<uint32_t> segments;
    for (uint32_t length : lengths[s]) {
      plan.truncated[s] += !split_long && length > capacity ? 1 : 0;
      for_each_segment(length, capacity, split_long,
                       [&](int64_t, int64_t count) { segments.push_back(static_cast<uint32_t>(count)); });
    }
    const Bins bins = best_fit_decreasing(segments, static_cast<uint32_t>(capacity));
    plan.rows[s] = static_cast<int64_t>(bins.size());
    plan.segments[s] = static_cast<int64_t>(segments.size());
    const std::vector<uint32_t> position_of = shuffled_positions(plan, s, seed);
    std::vector<uint32_t> row_at(bins.size());  // the inverse: the row at each position
    for (std::size_t row = 0; row < bins.size(); ++row) row_at[position_of[row]] = static_cast<uint32_t>(row);
    auto& place = plan.segment_position[s];
    auto& counts = plan.row_segments[s];
    place.assign(segments.size(), 0);
    counts.reserve(bins.size());
    uint32_t next = 0;
    for (uint32_t row : row_at) {
      counts.push_back(bins.first[row + 1] - bins.first[row]);
      for (uint32_t k = bins.first[row]; k < bins.first[row + 1]; ++k) place[bins.segments[k]] = next++;
    }
  }
}

data::TextExamples RowJoiner::join(const data::TextExamples& segments) {
  data::TextExamples rows;
  for (int64_t i = 0; i < segments.size(); ++i) {
    HPCTRAIN_CHECK(row_ < row_segments_.size(), "internal error: more segments than the {} rows planned hold",
                   row_segments_.size());
    pending_.append_from(segments, i);
    if (pending_.size() < static_cast<int64_t>(row_segments_[row_])) continue;
    rows.append_packed(pending_);
    pending_ = data::TextExamples();
    ++row_;
  }
  return rows;
}

}  // namespace hpctrain::prep::detail
