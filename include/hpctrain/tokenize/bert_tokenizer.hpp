// BertTokenizer: the facade the trainer uses -- ids equal to Hugging Face's BertTokenizerFast for every input
// (added special tokens, BertNormalizer, BertPreTokenizer, WordPiece, "[CLS] A [SEP] B [SEP]", longest_first).
#pragma once

#include "hpctrain/tokenize/normalizer.hpp"
#include "hpctrain/tokenize/vocab.hpp"
#include "hpctrain/tokenize/wordpiece.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

// What tokenizer_config.json (or tokenizer.json) says.
struct TokenizerConfig {
  bool do_lower_case = true;
  std::optional<bool> strip_accents;  // unset: follows do_lower_case
  bool tokenize_chinese_chars = true;
  bool clean_text = true;
  int64_t model_max_length = 512;  // HF writes 1e30 for "no limit"; read as INT64_MAX
  int max_input_chars_per_word = 100;
  std::string unk_token = "[UNK]", cls_token = "[CLS]", sep_token = "[SEP]", pad_token = "[PAD]",
              mask_token = "[MASK]";
  std::string continuing_subword_prefix = "##";
  // Further tokens matched verbatim in the raw text (before normalization), like the five above.
  std::vector<std::string> additional_special_tokens;
};

struct Encoding {
  std::vector<int32_t> input_ids;
  std::vector<uint8_t> token_type_ids;  // 0 for [CLS] A [SEP], 1 for B [SEP]
  bool truncated = false;               // max_length dropped tokens
};

// Replaces each maximal invalid UTF-8 subsequence by U+FFFD (what encode does implicitly, as Python's
// bytes.decode("utf-8", errors="replace")); returns whether anything was replaced, so callers can count or warn.
bool replace_invalid_utf8(std::string& text);

class BertTokenizer {
 public:
  // dir holds a WordPiece tokenizer.json (model.type "WordPiece", BertNormalizer, BertPreTokenizer) or vocab.txt,
  // plus optional tokenizer_config.json whose explicit fields take precedence (as in transformers). Anything else
  // throws hpctrain::Error naming the file and field.
  static BertTokenizer from_pretrained(const std::filesystem::path& dir);
  // Throws when a special token of config is not in vocab.
  BertTokenizer(Vocab vocab, TokenizerConfig config);

  // Thread-safe (const; per-thread scratch buffers only). max_length counts the special tokens and must be at
  // least 2 (single) or 3 (pair); use kNoTruncation to keep everything. Invalid UTF-8 reads as U+FFFD.
  static constexpr int kNoTruncation = 1 << 30;
  [[nodiscard]] Encoding encode(std::string_view text, int max_length) const;
  [[nodiscard]] Encoding encode_pair(std::string_view text, std::string_view pair, int max_length) const;
  // Same as encode / encode_pair, reusing out's buffers.
  void encode_into(std::string_view text, std::optional<std::string_view> pair, int max_length, Encoding& out) const;

  // Same as the free function tokenize::replace_invalid_utf8.
  static bool replace_invalid_utf8(std::string& text) { return tokenize::replace_invalid_utf8(text); }

  [[nodiscard]] const Vocab& vocab() const { return vocab_; }
  [[nodiscard]] const TokenizerConfig& config() const { return config_; }
  [[nodiscard]] int32_t cls_id() const { return cls_id_; }
  [[nodiscard]] int32_t sep_id() const { return sep_id_; }
  [[nodiscard]] int32_t pad_id() const { return pad_id_; }
  [[nodiscard]] int32_t unk_id() const { return wordpiece_.unk_id(); }
  [[nodiscard]] int32_t mask_id() const { return mask_id_; }

  // {"type":"wordpiece","vocab_sha256":…,"vocab_size":…,"do_lower_case":…,"strip_accents":…, …}
  [[nodiscard]] nlohmann::json describe() const;
  // The tokenizer files it was loaded from (to copy into checkpoints); empty when built from a Vocab.
  [[nodiscard]] std::vector<std::filesystem::path> files() const { return files_; }

 private:
  struct SpecialToken {
    std::string content;
    int32_t id;
  };
  struct Workspace;

  // Appends the ids of one sequence, stopping once ids holds limit tokens (the rest would be truncated anyway).
  void tokenize_sequence(std::string_view text, size_t limit, Workspace& ws, std::vector<int32_t>& ids) const;
  void tokenize_segment(std::string_view segment, size_t limit, Workspace& ws, std::vector<int32_t>& ids) const;
  // First special token occurring at or after from (leftmost, then longest); nullptr when none.
  const SpecialToken* find_special(std::string_view text, size_t from, size_t& at) const;

  Vocab vocab_;
  TokenizerConfig config_;
  BertNormalizer normalizer_;
  WordPiece wordpiece_;
  std::vector<SpecialToken> special_tokens_;  // longest first
  std::array<bool, 256> special_first_byte_{};
  int common_first_byte_ = -1;  // the first byte of every special token when they all share it
  int32_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, mask_id_ = -1;
  std::vector<std::filesystem::path> files_;
};

// The vocabulary of a tokenizer.json: its model.vocab (ids in [0, size), none twice, as from_pretrained reads
// it). Its sha256() is that of the vocab.txt holding the same tokens in id order, so a folder with only
// tokenizer.json (what transformers 5 saves) is checked against a dataset's vocab_sha256 like vocab.txt.
[[nodiscard]] Vocab tokenizer_json_vocab(const std::filesystem::path& tokenizer_json);

}  // namespace hpctrain::tokenize
