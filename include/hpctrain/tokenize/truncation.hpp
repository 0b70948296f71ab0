// Truncation of one or two token sequences to a budget, as Hugging Face tokenizers' "longest_first" strategy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpctrain::tokenize {

// Truncates first (and second, when given) so their total length is at most budget (tokens, special tokens
// excluded). A single sequence keeps its first `budget` tokens. For a pair with n1 <= n2 (either order): when both
// fit nothing changes; when the shorter fits in half the budget it is kept whole and the longer gets the rest;
// otherwise each keeps budget / 2, the longer one getting the odd token. The lengths compared are those after the
// early stop described in Note [Truncation stops early] (src/tokenize/bert_tokenizer.cpp).
void truncate_longest_first(std::vector<int32_t>& first, std::vector<int32_t>* second, size_t budget);

}  // namespace hpctrain::tokenize
