// The parts of a ByteLevelBpeTokenizer, and the tokenizer.json reader that builds them.
// Note [Byte-level BPE pipeline]: encode is, as Hugging Face tokenizers: added tokens split off the raw text
// (added_tokens.hpp), the rest normalized (NFC or nothing), split by each Split regex in order, each piece's
// bytes mapped to byte-level characters (byte_level.hpp), BPE per piece (bpe.hpp), then the post-processor's
// prefix and suffix ids. The reader refuses any component outside this pipeline, so nothing is silently ignored.
#pragma once

#include "tokenize/added_tokens.hpp"
#include "tokenize/bpe.hpp"
#include "tokenize/regex_split.hpp"

#include <filesystem>
#include <optional>
#include <vector>

namespace hpctrain::tokenize::detail {

enum class Normalization { kNone, kNfc };

struct ByteLevelBpeParts {
  explicit ByteLevelBpeParts(Bpe model) : bpe(std::move(model)) {}

  Bpe bpe;
  AddedTokens added_tokens;
  Normalization normalization = Normalization::kNone;
  std::vector<Regex> splits;  // applied in order before the byte-level mapping (GPT-2's regex for ByteLevel)
  std::vector<int32_t> prefix_ids, suffix_ids;  // TemplateProcessing's single template around $A
  std::optional<int32_t> bos_id, eos_id;
  size_t vocab_size = 0;
  std::vector<std::filesystem::path> files;
};

// Reads tokenizer_json and, when given, tokenizer_config.json.
[[nodiscard]] ByteLevelBpeParts read_byte_level_bpe(const std::filesystem::path& tokenizer_json,
                                                    const std::optional<std::filesystem::path>& config_json);

}  // namespace hpctrain::tokenize::detail
