// Private: Python's str semantics on UTF-8 strings, as chat templates see them through Jinja (indices and lengths
// count code points; whitespace, case and repr as CPython 3.11 defines them). Strings are valid UTF-8 (JSON text
// and template literals are checked before they get here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::chat::py {

// The code points of valid UTF-8, and back.
[[nodiscard]] std::u32string decode(std::string_view text);
[[nodiscard]] std::string encode(std::u32string_view text);
[[nodiscard]] bool is_ascii(std::string_view text);
[[nodiscard]] int64_t length(std::string_view text);  // len(s): code points

// str.isspace() of one code point (the characters str.split() and str.strip() treat as whitespace).
[[nodiscard]] bool is_space(char32_t c);

// str.strip / lstrip / rstrip: `chars` nullopt strips whitespace.
[[nodiscard]] std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit: `separator` nullopt splits on runs of whitespace; maxsplit < 0: no limit. Throws on "".
[[nodiscard]] std::vector<std::string> split(std::string_view text, const std::optional<std::string>& separator,
                                             int64_t maxsplit, bool from_right);
// str.splitlines(keepends)
[[nodiscard]] std::vector<std::string> splitlines(std::string_view text, bool keepends);
// str.replace(old, new, count); count < 0: all.
[[nodiscard]] std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count);
// str.find / rfind within [start, end) (Python slice bounds, code points): the code point index or -1.
[[nodiscard]] int64_t find(std::string_view text, std::string_view sub, std::optional<int64_t> start,
                           std::optional<int64_t> end, bool from_right);
[[nodiscard]] int64_t count(std::string_view text, std::string_view sub);

// Case mappings (the simple mappings; a character whose Python mapping is a special one, e.g. U+00DF for upper()
// or a final sigma for lower(), makes these throw Error naming it, rather than giving a different text).
[[nodiscard]] std::string lower(std::string_view text);
[[nodiscard]] std::string upper(std::string_view text);
[[nodiscard]] std::string swapcase(std::string_view text);
[[nodiscard]] std::string title(std::string_view text);       // str.title()
[[nodiscard]] std::string capitalize(std::string_view text);  // str.capitalize()
// Predicates as str.isdigit() etc. on every code point (false for "").
enum class CharClass { digit, alpha, alnum, space, lower, upper };
[[nodiscard]] bool all_of_class(std::string_view text, CharClass what);

// s[index] (negative from the end) or nullopt when out of range.
[[nodiscard]] std::optional<std::string> at(std::string_view text, int64_t index);
// Python's slice.indices(length) for a step != 0: the normalized start, stop and step.
struct SliceBounds {
  int64_t start = 0, stop = 0, step = 1;
};
[[nodiscard]] SliceBounds slice_indices(std::optional<int64_t> start, std::optional<int64_t> stop,
                                        std::optional<int64_t> step, int64_t length);
// The positions a slice selects, in order.
[[nodiscard]] std::vector<int64_t> slice_positions(const SliceBounds& bounds);
[[nodiscard]] std::string slice(std::string_view text, const SliceBounds& bounds);

// markupsafe.escape(s): & < > ' " as HTML entities.
[[nodiscard]] std::string html_escape(std::string_view text);

// repr(s): quotes and escapes as CPython.
[[nodiscard]] std::string repr(std::string_view text);
// repr(x) / str(x) of a float: the shortest digits that round-trip, in CPython's layout ("1.0", "1e+16", "1e-05").
[[nodiscard]] std::string float_repr(double value);
// round(x, ndigits) of a float as CPython (correctly rounded, ties to even on the exact binary value).
[[nodiscard]] double round_float(double value, int64_t ndigits);

}  // namespace hpctrain::chat::py
