// UTF-8 decoding with U+FFFD substitution of maximal invalid subparts (Unicode 15, section 3.9, table 3-7).
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::tokenize::utf8 {

char32_t decode_multibyte(std::string_view text, size_t& pos) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  const unsigned char lead = bytes[pos];
  int length = 0;
  char32_t cp = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte (table 3-7)
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;       // no overlongs
    if (lead == 0xED) high = 0x9F;      // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07;
    if (lead == 0xF0) low = 0x90;       // no overlongs
    if (lead == 0xF4) high = 0x8F;      // nothing above U+10FFFF
  } else {
    ++pos;  // continuation byte without a lead, C0, C1, F5..FF
    return kReplacementCharacter;
  }
  size_t next = pos + 1;
  for (int k = 1; k < length; ++k, ++next) {
    // A truncated or broken sequence is replaced as a whole; the offending byte starts the next decode.
    if (next >= text.size() || bytes[next] < low || bytes[next] > high) {
      pos = next;
      return kReplacementCharacter;
    }
    cp = (cp << 6) | (bytes[next] & 0x3F);
    low = 0x80, high = 0xBF;
  }
  pos = next;
  return cp;
}

bool is_valid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (decode(text, pos) == kReplacementCharacter && text.compare(start, pos - start, "\xEF\xBF\xBD") != 0) {
      return false;
    }
  }
  return true;
}

bool replace_invalid(std::string& text) {
  if (is_valid(text)) return false;
  std::string repaired;
  repaired.reserve(text.size() + 16);
  size_t pos = 0;
  while (pos < text.size()) append(repaired, decode(text, pos));
  text.swap(repaired);
  return true;
}

size_t count_scalars(std::string_view valid_text) {
  size_t count = 0;
  for (char byte : valid_text) count += (static_cast<unsigned char>(byte) & 0xC0) != 0x80;
  return count;
}

}  // namespace hpctrain::tokenize::utf8
