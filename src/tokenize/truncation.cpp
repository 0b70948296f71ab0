// longest_first truncation, transcribed from tokenizers/src/utils/truncation.rs (truncate_encodings).
#include "hpctrain/tokenize/truncation.hpp"

#include <algorithm>
#include <utility>

namespace hpctrain::tokenize {

void truncate_longest_first(std::vector<int32_t>& first, std::vector<int32_t>* second, size_t budget) {
  if (second == nullptr) {
    if (first.size() > budget) first.resize(budget);
    return;
  }
  if (first.size() + second->size() <= budget) return;
  size_t n1 = first.size(), n2 = second->size();
  const bool swapped = n1 > n2;
  if (swapped) std::swap(n1, n2);  // n1 is the shorter
  n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
  if (n1 + n2 > budget) {
    n1 = budget / 2;
    n2 = n1 + budget % 2;
  }
  if (swapped) std::swap(n1, n2);
  first.resize(std::min(first.size(), n1));
  second->resize(std::min(second->size(), n2));
}

}  // namespace hpctrain::tokenize
