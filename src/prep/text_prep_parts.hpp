// Private: the passes of `prep text` at corpus scale (Note [Prep at corpus scale] in text_prep.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/data/examples.hpp"
#include "hpctrain/data/text_records.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/prep/text_prep.hpp"

namespace hpctrain::tokenize {
class BertTokenizer;
}

namespace hpctrain::prep::detail {

// One valid input row, before tokenization.
struct RawExample {
  std::string text;
  std::string pair;
  std::string label;
  int64_t source_index = 0;            // row in the input file
  bool replaced_invalid_utf8 = false;  // JSONL: the reader already replaced invalid UTF-8 by U+FFFD
};

// The first bad row of a range (without --skip-invalid); row counts from the range's first row.
struct BadRow {
  int64_t line = 0;
  int64_t row = 0;
  std::string detail;
};

// The checks of one record: missing fields, empty text, empty label, a label outside --labels.
class RowChecker {
 public:
  explicit RowChecker(const TextPrepOptions& options);
  // nullopt when the row is rejected: counted by reason in `skipped` (--skip-invalid), else `bad` is set.
  std::optional<RawExample> check(data::TextRecord& record, std::map<std::string, int64_t>& skipped,
                                  std::optional<BadRow>& bad) const;
  std::vector<std::string> field_names() const;

 private:
  const TextPrepOptions& options_;
  std::vector<std::string> forced_;  // sorted --labels
};

// "FILE: line L (row R): DETAIL" with the --skip-invalid hint, as the serial reader always said it.
std::string bad_row_message(const std::filesystem::path& path, const BadRow& bad);

// This rank's part of an input file (Note [Record ranges]): byte ranges split at record boundaries,
// quote-aware for CSV/TSV. Plain files only: prep text decompresses a gzip input first (Note [Splitting a gzip
// input]); a gzip file fails on every rank (it cannot be entered in the middle). Collective.
data::TextReaderOptions input_range(const std::filesystem::path& path, dist::Comm& comm);

// Per input file: each row's split (kSkipped for rejected rows) and position in its split.
inline constexpr uint8_t kSkipped = 255;
struct FileRows {
  std::vector<uint8_t> split;
  std::vector<uint32_t> position;
};

// Where every example goes: the stratified split and the one seeded shuffle per split, exactly as the
// in-memory prep did them (Note [Same order as the in-memory prep]).
struct SplitPlan {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::vector<std::vector<int64_t>> label_counts;  // [split][label]
  std::vector<FileRows> files;                     // one per input file, rows in file order
};
// labels[f][row]: label id of each row of input file f, -1 for a rejected row. File 0 is the training input
// (split by validation_fraction when > 0); the other files are whole splits named in `file_splits`.
SplitPlan plan_splits(std::vector<std::vector<int32_t>> labels, const std::vector<std::string>& file_splits,
                      std::size_t num_labels, double validation_fraction, uint64_t seed);

// Tokenizes rows on `threads` threads; the result keeps the rows' order (labels and source_index filled).
struct TokenizeCounts {
  int64_t invalid_utf8 = 0;
  int64_t truncated = 0;
};
data::TextExamples tokenize_rows(const std::vector<RawExample>& rows, const std::vector<int64_t>& label_ids,
                                 const tokenize::BertTokenizer& tokenizer, int max_length, bool pairs, int threads,
                                 TokenizeCounts& counts);

}  // namespace hpctrain::prep::detail

namespace hpctrain::prep::detail {

// Note [Bucket files]: the external shuffle. Every rank appends each tokenized example to the bucket file of
// its destination (split, position / rows_per_bucket), next to the output; rank 0 then reads bucket after
// bucket (every rank's file of it), puts the examples in position order and appends them to the HDF5 file.
// So one bucket's examples are in memory at a time. Files are created for every bucket (empty ones too), so
// a missing file means the ranks do not share the output's folder. Each rank removes its files when done
// (rank 0 removes those it has read), on success and on failure.
class BucketWriter {
 public:
  BucketWriter(std::filesystem::path stem, int rank, const std::vector<int64_t>& split_sizes, int64_t rows_per_bucket,
               std::size_t buffer_bytes);
  ~BucketWriter();
  BucketWriter(const BucketWriter&) = delete;
  BucketWriter& operator=(const BucketWriter&) = delete;

  // Example i of `examples` goes to position `position` of split `split`.
  void add(std::size_t split, uint32_t position, const data::TextExamples& examples, int64_t i);
  void flush();  // every buffer to its file; creates the files of empty buckets

  static std::filesystem::path path(const std::filesystem::path& stem, int rank, std::size_t split, int64_t bucket);

 private:
  void write(std::size_t index);

  std::filesystem::path stem_;
  int rank_;
  int64_t rows_per_bucket_;
  std::size_t buffer_bytes_;
  std::vector<std::size_t> first_index_;  // per split: index of its bucket 0
  std::vector<std::string> buffers_;      // per bucket
  std::vector<std::pair<std::size_t, int64_t>> bucket_of_index_;
};

// Rank 0: the `count` examples of bucket `bucket` of split `split`, from every rank's file, in position order;
// removes the files it read. `pairs` / `loss_mask`: the examples carry token types / a loss mask.
data::TextExamples read_bucket(const std::filesystem::path& stem, int ranks, std::size_t split, int64_t bucket,
                               int64_t rows_per_bucket, int64_t count, bool pairs, bool loss_mask = false);

}  // namespace hpctrain::prep::detail
