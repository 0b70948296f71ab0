// `prep lm`: a document's ids, the packing of documents into rows and the plan of splits and positions.
#include "lm_packing.hpp"

#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"

namespace hpctrain::prep::detail {

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
    HPCTRAIN_CHECK(plan.rows[s] < UINT32_MAX, "split '{}' would have {} rows; prep lm handles up to {} per split",
                   plan.documents.names[s], plan.rows[s], UINT32_MAX - 1);
    // The k-th row cut goes to position_of[k]: the inverse of a seeded shuffle of 0..rows-1 (as place_rows does).
    std::vector<uint32_t> order(static_cast<std::size_t>(plan.rows[s]));
    std::iota(order.begin(), order.end(), 0u);
    shuffle(order, derive_seed(seed, 3, s));
    std::vector<uint32_t> position_of(order.size());
    for (std::size_t position = 0; position < order.size(); ++position) position_of[order[position]] = static_cast<uint32_t>(position);
    plan.row_position.push_back(std::move(position_of));
  }
}

}  // namespace hpctrain::prep::detail
