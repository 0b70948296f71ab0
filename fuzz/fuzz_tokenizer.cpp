// libFuzzer target: BertTokenizer::encode / encode_pair (bert-base-uncased vocabulary, four configurations) on
// arbitrary bytes. Input: byte 0 picks the configuration (bits 0-1) and pair mode (bit 2), byte 1 the max_length
// (255: no truncation), byte 2 where a pair is split; the rest is the text.
// Oracle: ids inside the vocabulary, the [CLS] ... [SEP] template, max_length respected, an untruncated
// encoding equal to the one without a limit, and invalid UTF-8 encoding exactly as its U+FFFD replacement.
#include "fuzz_util.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <fmt/format.h>

#include <array>
#include <optional>

using hpctrain::tokenize::BertTokenizer;
using hpctrain::tokenize::Encoding;
using hpctrain::tokenize::TokenizerConfig;

namespace {

std::array<std::optional<BertTokenizer>, 4> make_tokenizers() {
  const auto vocab = hpctrain::tokenize::Vocab::from_file(HPCTRAIN_REPO_DIR "/data/bert-base-uncased/vocab.txt");
  std::array<TokenizerConfig, 4> configs;
  configs[1].do_lower_case = false;  // cased rules (accents kept) on the uncased vocabulary
  configs[2].strip_accents = false;
  configs[2].tokenize_chinese_chars = false;
  configs[3].clean_text = false;
  configs[3].max_input_chars_per_word = 8;
  configs[3].additional_special_tokens = {"[unused0]", "hello"};  // two first bytes: no memchr shortcut
  std::array<std::optional<BertTokenizer>, 4> tokenizers;
  for (std::size_t i = 0; i < configs.size(); ++i) tokenizers[i].emplace(vocab, configs[i]);
  return tokenizers;
}

void check_template(const BertTokenizer& tokenizer, const Encoding& encoding, int max_length) {
  const std::string where = fmt::format("max_length {}, {} ids", max_length, encoding.input_ids.size());
  HPCTRAIN_FUZZ_ASSERT(encoding.input_ids.size() >= 2 && encoding.input_ids.size() <= std::size_t(max_length), where);
  HPCTRAIN_FUZZ_ASSERT(encoding.token_type_ids.size() == encoding.input_ids.size(), where);
  HPCTRAIN_FUZZ_ASSERT(encoding.input_ids.front() == tokenizer.cls_id() && encoding.input_ids.back() == tokenizer.sep_id(),
                       where);
  for (const std::int32_t id : encoding.input_ids) {
    HPCTRAIN_FUZZ_ASSERT(id >= 0 && std::size_t(id) < tokenizer.vocab().size(), where);
  }
  for (const std::uint8_t type : encoding.token_type_ids) HPCTRAIN_FUZZ_ASSERT(type <= 1, where);
}

Encoding encode(const BertTokenizer& tokenizer, std::string_view text, std::optional<std::string_view> pair, int max) {
  Encoding out;
  tokenizer.encode_into(text, pair, max, out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto tokenizers = make_tokenizers();
  if (size < 3) return 0;
  const BertTokenizer& tokenizer = *tokenizers[data[0] & 3];
  const bool is_pair = (data[0] & 4) != 0;
  const int max_length = data[1] == 255 ? BertTokenizer::kNoTruncation : 3 + data[1];
  const std::string_view input(reinterpret_cast<const char*>(data + 3), size - 3);
  const std::size_t split = is_pair ? input.size() * data[2] / 256 : input.size();
  const std::string_view text = input.substr(0, split);
  const std::optional<std::string_view> pair = is_pair ? std::optional(input.substr(split)) : std::nullopt;

  const Encoding encoding = encode(tokenizer, text, pair, max_length);
  check_template(tokenizer, encoding, max_length);
  if (!encoding.truncated && max_length != BertTokenizer::kNoTruncation) {
    const Encoding whole = encode(tokenizer, text, pair, BertTokenizer::kNoTruncation);
    HPCTRAIN_FUZZ_ASSERT(whole.input_ids == encoding.input_ids && !whole.truncated, "not truncated, yet different");
  }

  std::string repaired_text(text), repaired_pair(pair.value_or(""));
  const bool text_replaced = BertTokenizer::replace_invalid_utf8(repaired_text);
  const bool pair_replaced = BertTokenizer::replace_invalid_utf8(repaired_pair);
  HPCTRAIN_FUZZ_ASSERT(hpctrain::tokenize::utf8::is_valid(repaired_text) && hpctrain::tokenize::utf8::is_valid(repaired_pair),
                       "replace_invalid_utf8 left invalid UTF-8");
  if (text_replaced || pair_replaced) {
    const Encoding repaired = encode(tokenizer, repaired_text, pair ? std::optional<std::string_view>(repaired_pair)
                                                                    : std::nullopt, max_length);
    HPCTRAIN_FUZZ_ASSERT(repaired.input_ids == encoding.input_ids, "invalid UTF-8 encodes unlike its U+FFFD replacement");
  }
  return 0;
}
