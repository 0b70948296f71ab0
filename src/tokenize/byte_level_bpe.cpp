// ByteLevelBpeTokenizer: encode and decode (Note [Byte-level BPE pipeline] in byte_level_bpe_parts.hpp).
#include "hpctrain/tokenize/byte_level_bpe.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"
#include "tokenize/byte_level.hpp"
#include "tokenize/byte_level_bpe_parts.hpp"

#include <utf8proc.h>

#include <cstdlib>

namespace hpctrain::tokenize {
namespace {

namespace fs = std::filesystem;

// NFC of valid UTF-8 (utf8proc; tokenizers uses the unicode-normalization crate, same Unicode data).
std::string nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), utf8proc_ssize_t(text.size()), &out,
                   utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (length < 0) fail("NFC normalization failed: {}", utf8proc_errmsg(length));
  std::string result(reinterpret_cast<const char*>(out), size_t(length));
  std::free(out);
  return result;
}

}  // namespace

ByteLevelBpeTokenizer ByteLevelBpeTokenizer::from_pretrained(const fs::path& path) {
  const bool is_dir = fs::is_directory(path);
  const fs::path tokenizer_json = is_dir ? path / "tokenizer.json" : path;
  HPCTRAIN_CHECK(fs::is_regular_file(tokenizer_json), "{}: no such file (expected a Hugging Face tokenizer.json{})",
                 tokenizer_json.string(), is_dir ? " in the tokenizer folder" : " or a folder holding one");
  std::optional<fs::path> config_json = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (!fs::exists(*config_json)) config_json.reset();
  return ByteLevelBpeTokenizer(
      std::make_unique<detail::ByteLevelBpeParts>(detail::read_byte_level_bpe(tokenizer_json, config_json)));
}

ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(std::unique_ptr<detail::ByteLevelBpeParts> parts)
    : parts_(std::move(parts)) {}
ByteLevelBpeTokenizer::~ByteLevelBpeTokenizer() = default;
ByteLevelBpeTokenizer::ByteLevelBpeTokenizer(ByteLevelBpeTokenizer&&) noexcept = default;
ByteLevelBpeTokenizer& ByteLevelBpeTokenizer::operator=(ByteLevelBpeTokenizer&&) noexcept = default;

std::vector<int32_t> ByteLevelBpeTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const detail::ByteLevelBpeParts& parts = *parts_;
  std::string valid(text);
  utf8::replace_invalid(valid);
  std::vector<detail::Segment> segments;
  const auto normalize = [&](std::string_view raw) {
    return parts.normalization == detail::Normalization::kNfc ? nfc(raw) : std::string(raw);
  };
  parts.added_tokens.split(valid, normalize, segments);
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = parts.prefix_ids;
  std::vector<std::string_view> pieces, next_pieces;
  std::string word;
  for (const detail::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    pieces.assign(1, segment.text);
    for (const detail::Regex& regex : parts.splits) {
      next_pieces.clear();
      for (const std::string_view piece : pieces) regex.split_isolated(piece, next_pieces);
      pieces.swap(next_pieces);
    }
    for (const std::string_view piece : pieces) {
      word.clear();
      detail::append_byte_level(piece, word);
      parts.bpe.tokenize(word, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), parts.suffix_ids.begin(), parts.suffix_ids.end());
  return ids;
}

// As tokenizers' decode with the ByteLevel decoder: each token's characters back to bytes (a token with a
// character outside the byte-level alphabet contributes its UTF-8 as is), then lossy UTF-8.
std::string ByteLevelBpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  const Vocab& vocab = parts_->bpe.vocab();
  std::string bytes;
  for (const int32_t id : ids) {
    const detail::AddedToken* added = parts_->added_tokens.find_id(id);
    if (added == nullptr && (id < 0 || size_t(id) >= vocab.size())) continue;
    const std::string& token = added ? added->content : vocab.tokens()[size_t(id)];
    const auto token_bytes = detail::byte_level_to_bytes(token);
    bytes += token_bytes ? *token_bytes : token;
  }
  utf8::replace_invalid(bytes);
  return bytes;
}

std::string ByteLevelBpeTokenizer::token_bytes(int32_t id) const {
  const Vocab& vocab = parts_->bpe.vocab();
  if (const detail::AddedToken* added = parts_->added_tokens.find_id(id)) return added->content;
  if (id < 0 || size_t(id) >= vocab.size()) return "";
  const std::string& token = vocab.tokens()[size_t(id)];
  auto bytes = detail::byte_level_to_bytes(token);
  return bytes ? std::move(*bytes) : token;
}

bool ByteLevelBpeTokenizer::is_added_token(int32_t id) const { return parts_->added_tokens.find_id(id) != nullptr; }

size_t ByteLevelBpeTokenizer::vocab_size() const { return parts_->vocab_size; }

std::optional<int32_t> ByteLevelBpeTokenizer::token_to_id(std::string_view token) const {
  if (const detail::AddedToken* added = parts_->added_tokens.find_content(token)) return added->id;
  return parts_->bpe.vocab().find(token);
}

std::optional<int32_t> ByteLevelBpeTokenizer::bos_id() const { return parts_->bos_id; }
std::optional<int32_t> ByteLevelBpeTokenizer::eos_id() const { return parts_->eos_id; }
const std::vector<fs::path>& ByteLevelBpeTokenizer::files() const { return parts_->files; }

}  // namespace hpctrain::tokenize
