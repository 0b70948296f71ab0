// The GPT-2 byte <-> character map of byte-level BPE: every byte is shown as one printable character, so a
// vocabulary of strings covers all byte sequences (printable ASCII and Latin-1 map to themselves, the other 68
// bytes to U+0100.., e.g. ' ' -> 'Ġ' U+0120, '\n' -> 'Ċ' U+010A), as bytes_to_unicode() in GPT-2's encoder.py.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace hpctrain::tokenize::detail {

// Appends the byte-level characters (UTF-8) of every byte of text to out.
void append_byte_level(std::string_view text, std::string& out);

// The bytes a token's byte-level characters stand for; nullopt when a character is not one of the 256 (added
// tokens such as "<|endoftext|>" are made of mapped characters, one with a space or an emoji is not).
[[nodiscard]] std::optional<std::string> byte_level_to_bytes(std::string_view token);

// The 256 characters (UTF-8), indexed by byte.
[[nodiscard]] const std::array<std::string, 256>& byte_level_alphabet();

}  // namespace hpctrain::tokenize::detail
