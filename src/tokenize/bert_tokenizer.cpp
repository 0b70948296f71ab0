// BertTokenizer: special-token split of the raw text, then normalize -> pre-tokenize -> WordPiece per chunk,
// truncation (longest_first) and the [CLS] A [SEP] B [SEP] template.
#include "hpctrain/tokenize/bert_tokenizer.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/pre_tokenizer.hpp"
#include "hpctrain/tokenize/truncation.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <algorithm>
#include <cstring>

namespace hpctrain::tokenize {
namespace {

// Texts are normalized in chunks of about this many bytes, cut after an ASCII space, tab or newline: such a byte
// always ends a word and an NFD run, so chunking changes nothing but memory use and lets truncation stop early.
constexpr size_t kChunkBytes = 16 * 1024;

size_t chunk_end(std::string_view text, size_t start) {
  if (text.size() - start <= kChunkBytes) return text.size();
  for (size_t pos = start + kChunkBytes; pos < text.size(); ++pos) {
    const char byte = text[pos];
    if (byte == ' ' || byte == '\n' || byte == '\t' || byte == '\r') return pos + 1;
  }
  return text.size();
}

NormalizerOptions normalizer_options(const TokenizerConfig& config) {
  return NormalizerOptions{config.clean_text, config.tokenize_chinese_chars,
                           config.strip_accents.value_or(config.do_lower_case), config.do_lower_case};
}

WordPieceOptions wordpiece_options(const TokenizerConfig& config) {
  return WordPieceOptions{config.unk_token, config.continuing_subword_prefix, config.max_input_chars_per_word};
}

}  // namespace

struct BertTokenizer::Workspace {
  std::string normalized;
  std::vector<std::string_view> words;
  std::vector<int32_t> first, second;
};

BertTokenizer::BertTokenizer(Vocab vocab, TokenizerConfig config)
    : vocab_(std::move(vocab)),
      config_(std::move(config)),
      normalizer_(normalizer_options(config_)),
      wordpiece_(vocab_, wordpiece_options(config_)) {
  HPCTRAIN_CHECK(config_.max_input_chars_per_word > 0, "tokenizer: max_input_chars_per_word must be positive, got {}",
                 config_.max_input_chars_per_word);
  std::vector<std::string> specials = {config_.unk_token, config_.cls_token, config_.sep_token, config_.pad_token,
                                       config_.mask_token};
  specials.insert(specials.end(), config_.additional_special_tokens.begin(), config_.additional_special_tokens.end());
  for (const std::string& token : specials) {
    const auto id = vocab_.find(token);
    HPCTRAIN_CHECK(id.has_value(), "tokenizer: special token '{}' is not in the vocabulary ({} tokens, sha256 {})",
                   token, vocab_.size(), vocab_.sha256());
    HPCTRAIN_CHECK(!token.empty(), "tokenizer: empty special token");
    special_tokens_.push_back({token, *id});
    special_first_byte_[static_cast<unsigned char>(token[0])] = true;
  }
  if (std::count(special_first_byte_.begin(), special_first_byte_.end(), true) == 1) {
    common_first_byte_ = static_cast<unsigned char>(special_tokens_.front().content[0]);
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [](const SpecialToken& a, const SpecialToken& b) { return a.content.size() > b.content.size(); });
  cls_id_ = vocab_.id_of(config_.cls_token);
  sep_id_ = vocab_.id_of(config_.sep_token);
  pad_id_ = vocab_.id_of(config_.pad_token);
  mask_id_ = vocab_.id_of(config_.mask_token);
}

const BertTokenizer::SpecialToken* BertTokenizer::find_special(std::string_view text, size_t from, size_t& at) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (common_first_byte_ >= 0) {  // usually '[': let memchr skip ahead
      const void* hit = std::memchr(text.data() + pos, common_first_byte_, text.size() - pos);
      if (hit == nullptr) return nullptr;
      pos = size_t(static_cast<const char*>(hit) - text.data());
    } else if (!special_first_byte_[static_cast<unsigned char>(text[pos])]) {
      continue;
    }
    for (const SpecialToken& special : special_tokens_) {
      if (text.compare(pos, special.content.size(), special.content) == 0) {
        at = pos;
        return &special;
      }
    }
  }
  return nullptr;
}

void BertTokenizer::tokenize_segment(std::string_view segment, size_t limit, Workspace& ws,
                                     std::vector<int32_t>& ids) const {
  for (size_t start = 0; start < segment.size() && ids.size() < limit;) {
    const size_t end = chunk_end(segment, start);
    normalizer_.normalize(segment.substr(start, end - start), ws.normalized);
    ws.words.clear();
    BertPreTokenizer::split(ws.normalized, ws.words);
    for (std::string_view word : ws.words) {
      wordpiece_.tokenize(word, ids);
      if (ids.size() >= limit) return;
    }
    start = end;
  }
}

void BertTokenizer::tokenize_sequence(std::string_view text, size_t limit, Workspace& ws,
                                      std::vector<int32_t>& ids) const {
  ids.clear();
  size_t segment_start = 0;
  while (ids.size() < limit) {
    size_t at = text.size();
    const SpecialToken* special = find_special(text, segment_start, at);
    tokenize_segment(text.substr(segment_start, at - segment_start), limit, ws, ids);
    if (special == nullptr) return;
    ids.push_back(special->id);
    segment_start = at + special->content.size();
  }
}

void BertTokenizer::encode_into(std::string_view text, std::optional<std::string_view> pair, int max_length,
                                Encoding& out) const {
  const int specials = pair ? 3 : 2;
  HPCTRAIN_CHECK(max_length >= specials, "encode: max_length {} is too small: {} needs {} special tokens", max_length,
                 pair ? "[CLS] A [SEP] B [SEP]" : "[CLS] A [SEP]", specials);
  thread_local Workspace ws;
  const size_t budget = size_t(max_length - specials);
  // Note [Truncation stops early]: Hugging Face tokenizers (0.23) stops tokenizing each sequence at the first word
  // boundary where it holds max_length tokens, before splitting the budget between a pair; the lengths the split
  // compares are these capped ones (it decides which sequence counts as longer). A single sequence only needs one
  // token past the budget to know that it was truncated.
  const size_t limit = pair ? size_t(max_length) : budget + 1;
  tokenize_sequence(text, limit, ws, ws.first);
  if (pair) tokenize_sequence(*pair, limit, ws, ws.second);
  out.truncated = ws.first.size() + (pair ? ws.second.size() : 0) > budget;
  truncate_longest_first(ws.first, pair ? &ws.second : nullptr, budget);

  out.input_ids.clear();
  out.input_ids.push_back(cls_id_);
  out.input_ids.insert(out.input_ids.end(), ws.first.begin(), ws.first.end());
  out.input_ids.push_back(sep_id_);
  const size_t first_part = out.input_ids.size();
  if (pair) {
    out.input_ids.insert(out.input_ids.end(), ws.second.begin(), ws.second.end());
    out.input_ids.push_back(sep_id_);
  }
  out.token_type_ids.assign(out.input_ids.size(), 1);
  std::fill_n(out.token_type_ids.begin(), first_part, uint8_t(0));
}

Encoding BertTokenizer::encode(std::string_view text, int max_length) const {
  Encoding out;
  encode_into(text, std::nullopt, max_length, out);
  return out;
}

Encoding BertTokenizer::encode_pair(std::string_view text, std::string_view pair, int max_length) const {
  Encoding out;
  encode_into(text, pair, max_length, out);
  return out;
}

bool replace_invalid_utf8(std::string& text) { return utf8::replace_invalid(text); }

nlohmann::json BertTokenizer::describe() const {
  nlohmann::json special = nlohmann::json::array();
  for (const std::string& token : config_.additional_special_tokens) special.push_back(token);
  return {
      {"type", "wordpiece"},
      {"vocab_sha256", vocab_.sha256()},
      {"vocab_size", vocab_.size()},
      {"do_lower_case", config_.do_lower_case},
      {"strip_accents", config_.strip_accents ? nlohmann::json(*config_.strip_accents) : nlohmann::json(nullptr)},
      {"tokenize_chinese_chars", config_.tokenize_chinese_chars},
      {"clean_text", config_.clean_text},
      {"model_max_length", config_.model_max_length},
      {"max_input_chars_per_word", config_.max_input_chars_per_word},
      {"continuing_subword_prefix", config_.continuing_subword_prefix},
      {"unk_token", config_.unk_token},
      {"cls_token", config_.cls_token},
      {"sep_token", config_.sep_token},
      {"pad_token", config_.pad_token},
      {"mask_token", config_.mask_token},
      {"additional_special_tokens", special},
  };
}

}  // namespace hpctrain::tokenize
