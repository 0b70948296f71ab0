// The GPT-2 byte <-> character map (bytes_to_unicode).
#include "tokenize/byte_level.hpp"

#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::tokenize::detail {
namespace {

// Bytes shown as themselves: '!'..'~', '¡'..'¬', '®'..'ÿ'. The others take U+0100 + n in byte order.
bool shown_as_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

struct ByteLevelMap {
  std::array<std::string, 256> char_of_byte;
  std::array<int, 0x144> byte_of_char{};  // code point -> byte + 1 (0: not a byte-level character)

  ByteLevelMap() {
    char32_t next_shifted = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t cp = shown_as_itself(byte) ? char32_t(byte) : next_shifted++;
      utf8::append(char_of_byte[size_t(byte)], cp);
      byte_of_char[cp] = byte + 1;
    }
  }
};

const ByteLevelMap& byte_level_map() {
  static const ByteLevelMap map;
  return map;
}

}  // namespace

void append_byte_level(std::string_view text, std::string& out) {
  const auto& chars = byte_level_map().char_of_byte;
  for (const char byte : text) out += chars[static_cast<unsigned char>(byte)];
}

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  const auto& bytes = byte_level_map().byte_of_char;
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    const char32_t cp = utf8::decode(token, pos);
    if (cp >= bytes.size() || bytes[cp] == 0) return std::nullopt;
    out += char(bytes[cp] - 1);
  }
  return out;
}

const std::array<std::string, 256>& byte_level_alphabet() { return byte_level_map().char_of_byte; }

}  // namespace hpctrain::tokenize::detail
