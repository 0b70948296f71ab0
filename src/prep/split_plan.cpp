// `prep text`: where each row goes — the stratified split and the one seeded shuffle per split, from label ids only.
#include <cmath>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep::detail {
namespace {

// Stratified split of file 0 (Note [Same order as the in-memory prep]): for each label, a seeded shuffle
// of its rows (ordinals among the valid rows); the first round(fraction x count) go to validation (split 1).
void split_by_fraction(const std::vector<int32_t>& labels, std::size_t num_labels, double fraction, uint64_t seed,
                       std::vector<uint8_t>& split) {
  std::vector<std::vector<uint32_t>> by_label(num_labels);
  std::vector<uint32_t> row_of_valid;
  for (std::size_t row = 0; row < labels.size(); ++row) {
    if (labels[row] < 0) continue;
    by_label[static_cast<std::size_t>(labels[row])].push_back(static_cast<uint32_t>(row_of_valid.size()));
    row_of_valid.push_back(static_cast<uint32_t>(row));
  }
  for (std::size_t label = 0; label < num_labels; ++label) {
    auto& members = by_label[label];
    shuffle(members, derive_seed(seed, 1, label));
    const auto count = static_cast<std::size_t>(std::llround(fraction * static_cast<double>(members.size())));
    for (std::size_t k = 0; k < count; ++k) split[row_of_valid[members[k]]] = 1;
  }
}

// Gives each row of split s its ordinal (input order), then replaces it by its position after
// shuffle(rows of s, derive_seed(seed, 2, s)): the permutation depends only on the count and the seed.
void place_rows(SplitPlan& plan, uint64_t seed) {
  std::vector<uint32_t> next(plan.names.size(), 0);
  for (auto& file : plan.files)
    for (std::size_t row = 0; row < file.split.size(); ++row)
      if (file.split[row] != kSkipped) file.position[row] = next[file.split[row]]++;
  for (std::size_t s = 0; s < plan.names.size(); ++s) {
    std::vector<uint32_t> order(next[s]);
    std::iota(order.begin(), order.end(), 0u);
    shuffle(order, derive_seed(seed, 2, s));
    std::vector<uint32_t> position_of(order.size());
    for (std::size_t position = 0; position < order.size(); ++position) position_of[order[position]] = static_cast<uint32_t>(position);
    for (auto& file : plan.files)
      for (std::size_t row = 0; row < file.split.size(); ++row)
        if (file.split[row] == s) file.position[row] = position_of[file.position[row]];
  }
}

}  // namespace

SplitPlan plan_splits(std::vector<std::vector<int32_t>> labels, const std::vector<std::string>& file_splits,
                      std::size_t num_labels, double validation_fraction, uint64_t seed) {
  SplitPlan plan;
  plan.names.push_back("train");
  if (validation_fraction > 0.0) plan.names.push_back("validation");
  plan.files.resize(labels.size());
  for (std::size_t f = 0; f < labels.size(); ++f) {
    HPCTRAIN_CHECK(labels[f].size() < UINT32_MAX, "an input file has {} rows; prep text handles up to {} per file",
                   labels[f].size(), UINT32_MAX - 1);
    if (f > 0) plan.names.push_back(file_splits[f]);
    const auto whole = static_cast<uint8_t>(plan.names.size() - 1);
    auto& file = plan.files[f];
    file.split.resize(labels[f].size());
    for (std::size_t row = 0; row < labels[f].size(); ++row) file.split[row] = labels[f][row] < 0 ? kSkipped : (f == 0 ? 0 : whole);
    if (f == 0 && validation_fraction > 0.0) split_by_fraction(labels[0], num_labels, validation_fraction, seed, file.split);
    file.position.resize(labels[f].size());
  }
  plan.sizes.assign(plan.names.size(), 0);
  plan.label_counts.assign(plan.names.size(), std::vector<int64_t>(num_labels, 0));
  for (std::size_t f = 0; f < labels.size(); ++f)
    for (std::size_t row = 0; row < labels[f].size(); ++row) {
      const uint8_t s = plan.files[f].split[row];
      if (s == kSkipped) continue;
      ++plan.sizes[s];
      ++plan.label_counts[s][static_cast<std::size_t>(labels[f][row])];
    }
  labels.clear();
  place_rows(plan, seed);
  return plan;
}

}  // namespace hpctrain::prep::detail
