// Loads tests/tokenize/golden/cases.jsonl (written by golden/generate_goldens.js from Hugging Face tokenizers)
// and builds the tokenizer configurations the goldens name.
#pragma once

#include "hpctrain/tokenize/bert_tokenizer.hpp"

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::tokenize::testing {

inline const std::filesystem::path kGoldenDir = HPCTRAIN_TEST_DATA_DIR "/tokenize/golden";
inline const std::filesystem::path kBertDir = HPCTRAIN_REPO_DIR "/data/bert-base-uncased";

struct GoldenCase {
  size_t line = 0;
  std::string variant;
  std::string text;                      // raw bytes (may be invalid UTF-8 when from text_hex)
  std::optional<std::string> text_pair;
  std::optional<std::string> replaced;   // for text_hex cases: the text after U+FFFD substitution
  int max_length = 0;
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> token_type_ids;
};

std::vector<GoldenCase> load_golden_cases();

// Printable form of a (possibly invalid) byte string: ASCII as is, everything else as \xNN.
std::string escaped(const std::string& bytes);
// "[101 7592 102] = [CLS] hello [SEP]"
std::string describe_ids(const BertTokenizer& tokenizer, const std::vector<int32_t>& ids);

// The tokenizers for the variants of reference.js, built from data/bert-base-uncased/vocab.txt.
std::map<std::string, BertTokenizer> bert_variants();

// A fresh empty directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  // Writes a file inside the directory and returns its path.
  std::filesystem::path write(const std::string& name, const std::string& contents) const;

 private:
  std::filesystem::path path_;
};

}  // namespace hpctrain::tokenize::testing
