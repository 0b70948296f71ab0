// Private: a fast path for the common JSONL line, a flat object of strings, numbers, booleans and nulls.
// nlohmann's lexer reads one character at a time through an adapter (~50 MB/s); this scans runs of plain bytes.
// Note [Flat JSON fast path]: it must accept only what nlohmann accepts and extract the same strings; anything
// else (nested values, surrogate escapes it does not pair, numbers that could overflow a double, syntax errors)
// returns false and the line goes through nlohmann, which also words the error. tests/data/flat_json_test.cpp
// checks the two agree on valid, mutated and random lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::data::detail {

// Extracts the top-level values of `field_names` from `line` (one JSON object, no line terminator) into `fields`
// (resized to field_names.size(); absent and null -> nullopt; numbers as written, except -0 -> "0").
// Returns false, with `fields` unspecified, when the line is outside the fast subset or not valid JSON.
[[nodiscard]] bool parse_flat_object(std::string_view line, const std::vector<std::string>& field_names,
                                     std::vector<std::optional<std::string>>& fields);

// Copies `text` to `out` with each maximal ill-formed UTF-8 subsequence replaced by U+FFFD (EF BF BD), exactly as
// Python's bytes.decode("utf-8", errors="replace"); returns whether anything was replaced.
bool replace_invalid_utf8(std::string_view text, std::string& out);

}  // namespace hpctrain::data::detail
