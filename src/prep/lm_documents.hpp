// Private: `prep lm`'s documents: the checks of a record, block tokenization, and the token streams that
// carry each rank's documents from pass 1 to rank 0 (Note [Token streams] in lm_prep.cpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

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

// Appends documents to a token stream file: per document its id count (uint32) and its ids (int32).
class TokenStreamWriter {
 public:
  explicit TokenStreamWriter(std::filesystem::path path);
  ~TokenStreamWriter();
  TokenStreamWriter(const TokenStreamWriter&) = delete;
  TokenStreamWriter& operator=(const TokenStreamWriter&) = delete;
  void write(const std::vector<int32_t>& ids);
  void close();  // throws when the data did not reach the file

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Reads the documents of several token streams, one file after the other, removing each file once read.
class TokenStreamReader {
 public:
  explicit TokenStreamReader(std::vector<std::filesystem::path> paths);
  ~TokenStreamReader();
  TokenStreamReader(const TokenStreamReader&) = delete;
  TokenStreamReader& operator=(const TokenStreamReader&) = delete;
  // The next document's ids; false after the last file.
  [[nodiscard]] bool next(std::vector<int32_t>& ids);

 private:
  bool open_next();
  std::vector<std::filesystem::path> paths_;
  std::size_t next_path_ = 0;
  std::FILE* file_ = nullptr;
};

}  // namespace hpctrain::prep::detail
