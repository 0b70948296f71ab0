// Private: how `prep lm` turns documents into rows (Note [Packing rows], Note [Best-fit-decreasing rows]) and where
// each document and row goes (LmPlan). Pure functions of their arguments: the same on every rank, tested without
// processes.
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

// Note [Best-fit-decreasing rows]
// As TRL's pack_dataset(strategy="bfd" or "bfd_split") applied to a whole split at once (map batch_size=None): the
// split's documents, in input order, become segments: each document cut to the row capacity (bfd; the cut tokens
// are dropped and the documents counted), or cut into pieces of the capacity, the last one shorter (bfd_split). The
// segments, sorted by length, longest first (a stable sort: equal lengths in input order), go one by one into the
// row with the least free space that still holds them, rows with equal space first come first served; a segment
// no row holds opens a new row. A row is its segments in the order placed; every segment starts a document
// (Note [Document boundaries] in src/data/examples.cpp). Rows are numbered as opened, then shuffled once with the
// seed as the other packings' rows. Golden-tested against TRL (tests/prep/golden/generate_bfd_goldens.py).

// The segments of a document of `length` tokens in rows of `capacity`: calls emit(first, count) for each, in order.
template <typename Emit>
void for_each_segment(int64_t length, int64_t capacity, bool split_long, Emit&& emit) {
  if (!split_long) return emit(int64_t{0}, std::min(length, capacity));
  for (int64_t first = 0; first < length; first += capacity) emit(first, std::min(capacity, length - first));
}

// Rows as compressed lists: row k holds segments[first[k] : first[k + 1]] (indices into the lengths given).
struct Bins {
  std::vector<uint32_t> first{0};
  std::vector<uint32_t> segments;
  [[nodiscard]] std::size_t size() const { return first.size() - 1; }
};
// Best-fit-decreasing of segments of `lengths` tokens (each 1..capacity) into rows of `capacity` tokens.
[[nodiscard]] Bins best_fit_decreasing(const std::vector<uint32_t>& lengths, uint32_t capacity);

// Puts the rows of bfd and bfd_split together from their segments, which arrive in row order in pieces (one bucket
// at a time, Note [Bucket files]): row k is the next row_segments[k] segments, each starting a document (Note
// [Document boundaries]; per-token arrays of the segments are kept, so rows carrying more than ids join alike).
class RowJoiner {
 public:
  explicit RowJoiner(const std::vector<uint32_t>& row_segments) : row_segments_(row_segments) {}
  // The rows these segments complete; a row begun here may be completed by the next piece.
  [[nodiscard]] data::TextExamples join(const data::TextExamples& segments);
  // Every row joined and nothing left over.
  [[nodiscard]] bool done() const { return row_ == row_segments_.size() && pending_.size() == 0; }
  [[nodiscard]] std::size_t rows() const { return row_; }

 private:
  const std::vector<uint32_t>& row_segments_;
  std::size_t row_ = 0;
  data::TextExamples pending_;  // the segments of the row begun
};

// Where every document and every row goes.
struct LmPlan {
  // Per document: its split (kSkipped for a rejected row) and, without packing, the position of its row.
  // File 0 holds the --input files' rows one file after another; file 1, if any, the --validation-input rows.
  SplitPlan documents;
  // wrapped: per split, the position of the k-th row cut (in input order) after the one shuffle. Else empty.
  std::vector<std::vector<uint32_t>> row_position;
  std::vector<int64_t> rows;  // per split
  // bfd, bfd_split, per split: the place of each segment (in input order) in the split's segments in row order
  // (rows at their shuffled positions), and the number of segments of the row at each position. Else empty.
  std::vector<std::vector<uint32_t>> segment_position;
  std::vector<std::vector<uint32_t>> row_segments;
  std::vector<int64_t> segments;   // per split (bfd, bfd_split)
  std::vector<int64_t> truncated;  // per split, bfd: documents cut to the row capacity

  // Records per split that go through the buckets: rows, or the segments of bfd and bfd_split.
  [[nodiscard]] const std::vector<int64_t>& bucket_records() const { return segment_position.empty() ? rows : segments; }
};

// Step 1, before the documents' lengths are known: valid[f][row] says whether row `row` of file f is a document.
// validation_fraction > 0 sends a seeded share of file 0's documents (never part of one) to "validation".
[[nodiscard]] LmPlan plan_documents(const std::vector<std::vector<uint8_t>>& valid, double validation_fraction,
                                    uint64_t seed);
// Step 2: the rows. Packing (block_size > 0): tokens[s] / block_size rows in split s, shuffled with the seed; without
// packing one row per document, shuffled in step 1.
void plan_rows(LmPlan& plan, const std::vector<int64_t>& tokens, int64_t block_size, uint64_t seed);
// Step 2 of bfd (split_long false) and bfd_split: lengths[s] holds the length (before any cut) of each document of
// split s in input order; rows of `capacity` tokens (Note [Best-fit-decreasing rows]), shuffled with the seed.
void plan_document_rows(LmPlan& plan, const std::vector<std::vector<uint32_t>>& lengths, int64_t capacity,
                        bool split_long, uint64_t seed);

}  // namespace hpctrain::prep::detail
