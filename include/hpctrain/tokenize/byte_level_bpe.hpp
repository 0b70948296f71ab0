// ByteLevelBpeTokenizer: the byte-level BPE tokenizers of causal language models (GPT-2, Llama-3, Qwen2), read
// from a Hugging Face tokenizer.json; ids equal AutoTokenizer(dir)(text)["input_ids"], decode equals
// AutoTokenizer.decode(ids) (special tokens kept, no clean-up of spaces).
//
// Supported tokenizer.json components (anything else is refused at load, naming the file and the field):
//   model        BPE (vocab + merges as "a b" or ["a", "b"]; unk_token, fuse_unk, ignore_merges); no dropout,
//                continuing_subword_prefix, end_of_word_suffix or byte_fallback
//   normalizer   null or NFC
//   pre_tokenizer ByteLevel(add_prefix_space=false, use_regex) or Sequence[Split(pattern, Isolated)..., ByteLevel(
//                add_prefix_space=false)]
//   post_processor null, ByteLevel, TemplateProcessing (single: specials, $A, specials), or a Sequence of those
//   decoder      ByteLevel
//   added_tokens without lstrip, rstrip or single_word; truncation and padding null
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::tokenize {

namespace detail {
struct ByteLevelBpeParts;
}

class ByteLevelBpeTokenizer {
 public:
  // path: a folder holding tokenizer.json (and optionally tokenizer_config.json, whose bos_token / eos_token name
  // bos_id / eos_id), or a tokenizer.json file. Throws hpctrain::Error naming the file and field of anything
  // unsupported or malformed.
  static ByteLevelBpeTokenizer from_pretrained(const std::filesystem::path& path);
  ~ByteLevelBpeTokenizer();
  ByteLevelBpeTokenizer(ByteLevelBpeTokenizer&&) noexcept;
  ByteLevelBpeTokenizer& operator=(ByteLevelBpeTokenizer&&) noexcept;

  // The ids of text, with the post-processor's special tokens when add_special_tokens (a BOS for Llama-3).
  // Thread-safe. Invalid UTF-8 reads as U+FFFD (as Python's errors="replace").
  [[nodiscard]] std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // The text of ids, special tokens included; ids of no token are skipped (as tokenizers); bytes that do not form
  // UTF-8 read as U+FFFD (a token may end inside a character: decode whole sequences, not token by token).
  [[nodiscard]] std::string decode(const std::vector<int32_t>& ids) const;

  // The bytes of the text one token stands for (an added token's content, a vocabulary token's bytes), without
  // repairing UTF-8: a token may end inside a character. "" for an id of no token.
  [[nodiscard]] std::string token_bytes(int32_t id) const;
  // Whether the id is one of tokenizer.json's added tokens (special or not).
  [[nodiscard]] bool is_added_token(int32_t id) const;

  // Ids run over [0, vocab_size()): the model's vocabulary and the added tokens (len(tokenizer) in transformers).
  [[nodiscard]] size_t vocab_size() const;
  [[nodiscard]] std::optional<int32_t> token_to_id(std::string_view token) const;  // added token or vocabulary
  // From tokenizer_config.json's bos_token / eos_token; nullopt when it names none (or there is no such file).
  [[nodiscard]] std::optional<int32_t> bos_id() const;
  [[nodiscard]] std::optional<int32_t> eos_id() const;
  // The files it was loaded from (to copy into checkpoints).
  [[nodiscard]] const std::vector<std::filesystem::path>& files() const;

 private:
  explicit ByteLevelBpeTokenizer(std::unique_ptr<detail::ByteLevelBpeParts> parts);
  std::unique_ptr<detail::ByteLevelBpeParts> parts_;
};

}  // namespace hpctrain::tokenize
