// Private: `prep lm`'s documents: the checks of a record, block tokenization, and the token streams that
// carry each rank's documents from pass 1 to rank 0 (Note [Token streams] in lm_prep.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_writer.hpp"
#include "hpctrain/data/text_records.hpp"
#include "hpctrain/prep/lm_prep.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::tokenize {
class ByteLevelBpeTokenizer;
}

namespace hpctrain::prep::detail {

// The text of a record, or nullopt when the record is rejected (malformed, the text field missing or blank):
// counted by reason in `skipped` with --skip-invalid, else `bad` is set.
std::optional<std::string> check_document(data::TextRecord& record, const LmPrepOptions& options,
                                          std::map<std::string, int64_t>& skipped, std::optional<BadRow>& bad);

struct DocumentCounts {
  int64_t invalid_utf8 = 0;
  int64_t truncated = 0;  // cut to max_length
};

// How documents become ids: the tokenizer's, then `eos` unless already last, cut to max_length (0: not cut).
struct DocumentTokenizer {
  const tokenize::ByteLevelBpeTokenizer& tokenizer;
  int32_t eos = 0;
  int max_length = 0;
  int threads = 1;
};

// The ids of each document, in order (tokenized on `how.threads` threads). full_lengths[i]: document i's ids
// before the cut. `replaced[i]`: the reader already replaced invalid UTF-8 in document i (counted as invalid).
std::vector<std::vector<int32_t>> tokenize_documents(const std::vector<std::string>& texts,
                                                     const std::vector<uint8_t>& replaced,
                                                     const DocumentTokenizer& how, std::vector<uint32_t>& full_lengths,
                                                     DocumentCounts& counts);

// One input file of a corpus-scale prep whose ranks each read a part (Note [Token streams] in lm_prep.cpp).
struct DocumentInput {
  std::filesystem::path path;
  std::filesystem::path read_path;  // path, or its decompressed temporary (Note [Splitting a gzip input])
  std::size_t index = 0;            // among the inputs: names its token streams
  std::size_t plan_file = 0;        // 0: one of the --input files; 1: --validation-input (LmPlan)
  int64_t plan_first = 0;           // index of its row 0 in the plan's file
  data::TextReaderOptions range;
  int64_t first_row = 0;                // rows of the ranks before this one
  int64_t rows = 0;                     // of every rank
  std::vector<uint8_t> local_valid;     // pass 1: per row of this rank, 1 for a document
  std::vector<uint32_t> local_lengths;  // pass 1: per document of this rank, its ids before any cut
};

// The --input files (plan file 0) and the --validation-input (plan file 1), if any.
[[nodiscard]] std::vector<DocumentInput> document_inputs(const std::vector<std::filesystem::path>& inputs,
                                                         const std::filesystem::path& validation_input);

// Pass 1 of one input on every rank (collective): each rank reads its range of the file (input_range) with
// `read_range`, which returns the first bad row of it (its row within the range) or nothing; then the input's row
// counts (first_row, rows) and the agreement on the first bad row, which every rank then throws, named with its row
// in the whole file. `command` ("prep lm") names the phase.
void read_on_every_rank(DocumentInput& input, dist::Comm& comm, const std::string& command,
                        const std::function<std::optional<BadRow>(DocumentInput&)>& read_range);

// Every row's flag in the plan's files, on every rank (each rank's part broadcast by it); sets plan_first.
[[nodiscard]] std::vector<std::vector<uint8_t>> gather_documents(std::vector<DocumentInput>& inputs, dist::Comm& comm);

struct LmPlan;  // lm_packing.hpp

// bfd, bfd_split: every document's length (before any cut) per split in input order, on every rank (collective:
// each rank's part of each input broadcast by it).
[[nodiscard]] std::vector<std::vector<uint32_t>> lengths_per_split(const std::vector<DocumentInput>& inputs,
                                                                   const LmPlan& plan, dist::Comm& comm);

// The end of pass 2 (rank 0): split `s` of the plan from its bucket files, in order, into the writer (its rows
// joined from their segments under bfd and bfd_split, Note [Best-fit-decreasing rows]), the split begun and ended
// here; `loss_mask`: the records carry one (prep sft). Returns the tokens written.
int64_t write_planned_split(data::DatasetWriter& writer, const LmPlan& plan, std::size_t s,
                            const std::filesystem::path& stem, int64_t rows_per_bucket, bool loss_mask, bool progress);

// Appends documents to a token stream file: per document its id count (uint32) and its ids (int32), then, in a
// stream with a loss mask (prep sft), one mask byte per id.
class TokenStreamWriter {
 public:
  explicit TokenStreamWriter(std::filesystem::path path, bool with_mask = false);
  ~TokenStreamWriter();
  TokenStreamWriter(const TokenStreamWriter&) = delete;
  TokenStreamWriter& operator=(const TokenStreamWriter&) = delete;
  void write(const std::vector<int32_t>& ids);
  void write(const std::vector<int32_t>& ids, const std::vector<uint8_t>& mask);  // a stream with a loss mask
  void close();  // throws when the data did not reach the file

 private:
  void write_ids(const std::vector<int32_t>& ids);
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  bool with_mask_ = false;
};

// Reads the documents of several token streams, one file after the other, removing each file once read.
class TokenStreamReader {
 public:
  explicit TokenStreamReader(std::vector<std::filesystem::path> paths, bool with_mask = false);
  ~TokenStreamReader();
  TokenStreamReader(const TokenStreamReader&) = delete;
  TokenStreamReader& operator=(const TokenStreamReader&) = delete;
  // The next document's ids; false after the last file.
  [[nodiscard]] bool next(std::vector<int32_t>& ids);
  [[nodiscard]] bool next(std::vector<int32_t>& ids, std::vector<uint8_t>& mask);  // a stream with a loss mask

 private:
  bool open_next();
  bool next_ids(std::vector<int32_t>& ids);
  std::vector<std::filesystem::path> paths_;
  bool with_mask_ = false;
  std::size_t next_path_ = 0;
  std::FILE* file_ = nullptr;
};

}  // namespace hpctrain::prep::detail
