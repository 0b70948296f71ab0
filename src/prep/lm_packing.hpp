// Private: how `prep lm` turns documents into rows (Note [Packing rows]) and where each document and row goes
// (LmPlan). Pure functions of their arguments: the same on every rank, tested without processes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "text_prep_parts.hpp"

namespace hpctrain::prep::detail {

// A document's ids for a causal LM: the tokenizer's (its special tokens included), then `eos` unless it is
// already the last id.
void end_with_eos(std::vector<int32_t>& ids, int32_t eos);

// Note [Packing rows]
// As run_clm's group_texts: the documents of a split, in input order, are concatenated and cut into rows of
// exactly block_size tokens; the tokens after the last whole row are dropped. A row may span several documents
// (and input files): its source_index is the row, in its input file, of the document its first token comes from.
class RowPacker {
 public:
  explicit RowPacker(int64_t block_size);
  // Adds a document (its ids and its row in its input file); calls emit(row_ids, source_index) for each row completed.
  template <typename Emit>
  void add(const int32_t* ids, std::size_t count, int64_t source_row, Emit&& emit) {
    for (std::size_t i = 0; i < count;) {
      if (row_.empty()) first_source_ = source_row;
      const std::size_t take = std::min<std::size_t>(count - i, static_cast<std::size_t>(block_size_) - row_.size());
      row_.insert(row_.end(), ids + i, ids + i + take);
      i += take;
      if (row_.size() < static_cast<std::size_t>(block_size_)) continue;
      emit(static_cast<const std::vector<int32_t>&>(row_), first_source_);
      row_.clear();
    }
  }
  // Tokens of the row begun but not completed: dropped when no document follows.
  [[nodiscard]] int64_t pending() const { return static_cast<int64_t>(row_.size()); }

 private:
  int64_t block_size_;
  std::vector<int32_t> row_;
  int64_t first_source_ = 0;
};

// Where every document and every row goes.
struct LmPlan {
  // Per document: its split (kSkipped for a rejected row) and, without packing, the position of its row.
  // File 0 holds the --input files' rows one file after another; file 1, if any, the --validation-input rows.
  SplitPlan documents;
  // Packing: per split, the position of the k-th row cut (in input order) after the one shuffle. Empty without packing.
  std::vector<std::vector<uint32_t>> row_position;
  std::vector<int64_t> rows;  // per split
};

// Step 1, before the documents' lengths are known: valid[f][row] says whether row `row` of file f is a document.
// validation_fraction > 0 sends a seeded share of file 0's documents (never part of one) to "validation".
[[nodiscard]] LmPlan plan_documents(const std::vector<std::vector<uint8_t>>& valid, double validation_fraction,
                                    uint64_t seed);
// Step 2: the rows. Packing (block_size > 0): tokens[s] / block_size rows in split s, shuffled with the seed; without
// packing one row per document, shuffled in step 1.
void plan_rows(LmPlan& plan, const std::vector<int64_t>& tokens, int64_t block_size, uint64_t seed);

}  // namespace hpctrain::prep::detail
