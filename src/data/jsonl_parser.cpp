// JSONL record parsing: the flat-object fast path first, else nlohmann's SAX interface (no DOM is built; only the
// requested top-level values are kept).
#include "jsonl_parser.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <string_view>

#include "flat_json.hpp"

namespace hpctrain::data::detail {
namespace {

using json = nlohmann::json;

// SAX handler: tracks nesting depth; a value at depth 1 right after a requested key is stored in its slot.
class FieldExtractor {
 public:
  FieldExtractor(const std::vector<std::string>& field_names, TextRecord& record)
      : field_names_(field_names), record_(record) {}

  bool null() {
    return scalar("null", [&](std::optional<std::string>& field) { field.reset(); });
  }
  bool boolean(bool value) {
    return scalar("a boolean", [&](std::optional<std::string>& field) { field = value ? "true" : "false"; });
  }
  bool number_integer(json::number_integer_t value) {
    return scalar("a number", [&](std::optional<std::string>& field) { field = fmt::format("{}", value); });
  }
  bool number_unsigned(json::number_unsigned_t value) {
    return scalar("a number", [&](std::optional<std::string>& field) { field = fmt::format("{}", value); });
  }
  bool number_float(json::number_float_t, const json::string_t& text) {
    return scalar("a number", [&](std::optional<std::string>& field) { field = text; });
  }
  bool string(json::string_t& value) {
    return scalar("a string", [&](std::optional<std::string>& field) { field = std::move(value); });
  }
  bool binary(json::binary_t&) {
    return scalar("binary data", [](std::optional<std::string>&) {});
  }

  bool start_object(std::size_t) { return open("an object"); }
  bool end_object() { return close(); }
  bool start_array(std::size_t) { return open("an array"); }
  bool end_array() { return close(); }

  bool key(json::string_t& key) {
    if (depth_ == 1) pending_slot_ = slot_of(key);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const json::exception& error) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep "parse error at line 1, column 7: ...".
    std::string_view message = error.what();
    if (const auto bracket = message.find("] "); message.rfind('[', 0) == 0 && bracket != std::string_view::npos) {
      message.remove_prefix(bracket + 2);
    }
    record_.error = fmt::format("malformed JSON: {}", message);
    return false;
  }

 private:
  int slot_of(const std::string& key) const {
    for (std::size_t i = 0; i < field_names_.size(); ++i) {
      if (field_names_[i] == key) return static_cast<int>(i);
    }
    return -1;
  }

  // A string, number, boolean or null value.
  template <typename Store>
  bool scalar(const char* kind, Store&& store) {
    if (depth_ == 0) return reject_top_level(kind);
    if (depth_ == 1 && pending_slot_ >= 0) {
      store(record_.fields[static_cast<std::size_t>(pending_slot_)]);
      pending_slot_ = -1;
    }
    return true;
  }

  bool open(const char* kind) {
    if (depth_ == 0 && std::strcmp(kind, "an object") != 0) return reject_top_level(kind);
    if (depth_ == 1 && pending_slot_ >= 0) {
      record_.error = fmt::format("field '{}' is {}; expected a string or number",
                                  field_names_[static_cast<std::size_t>(pending_slot_)], kind);
      return false;
    }
    ++depth_;
    return true;
  }

  bool close() {
    --depth_;
    return true;
  }

  bool reject_top_level(const char* kind) {
    record_.error =
        fmt::format("the line is {}; expected a JSON object with keys [{}]", kind, fmt::join(field_names_, ", "));
    return false;
  }

  const std::vector<std::string>& field_names_;
  TextRecord& record_;
  int depth_ = 0;
  int pending_slot_ = -1;  // slot of the last depth-1 key, until its value arrives
};

bool is_blank(const char* first, const char* last) {
  for (const char* c = first; c < last; ++c) {
    if (*c != ' ' && *c != '\t' && *c != '\r') return false;
  }
  return true;
}

}  // namespace

void extract_with_nlohmann(std::string_view line, const std::vector<std::string>& field_names, TextRecord& record) {
  record.error.clear();
  record.fields.resize(field_names.size());
  for (auto& field : record.fields) field.reset();
  FieldExtractor extractor(field_names, record);
  try {
    const bool ok = json::sax_parse(line.data(), line.data() + line.size(), &extractor);
    if (!ok && record.error.empty()) record.error = "malformed JSON: parsing stopped";
  } catch (const json::exception& error) {
    record.error = fmt::format("malformed JSON: {}", error.what());
  }
}

JsonlParser::JsonlParser(std::vector<std::string> field_names, bool whole_lines)
    : field_names_(std::move(field_names)), whole_lines_(whole_lines) {}

Scan JsonlParser::parse(const char* begin, const char* end, bool at_eof, TextRecord& record) const {
  const char* newline = static_cast<const char*>(std::memchr(begin, '\n', static_cast<std::size_t>(end - begin)));
  if (newline == nullptr && !at_eof) return Scan{};  // need_more
  const char* line_end = newline != nullptr ? newline : end;
  Scan scan{ScanStatus::record, static_cast<std::size_t>(line_end - begin) + (newline != nullptr ? 1 : 0),
            newline != nullptr ? 1 : 0};
  if (line_end > begin && line_end[-1] == '\r') --line_end;
  if (is_blank(begin, line_end)) {
    scan.status = ScanStatus::blank;
    return scan;
  }

  record.error.clear();
  record.replaced_invalid_utf8 = false;
  std::string_view line(begin, static_cast<std::size_t>(line_end - begin));
  if (whole_lines_) {
    record.fields.resize(1);
    std::string replaced;
    record.replaced_invalid_utf8 = replace_invalid_utf8(line, replaced);
    record.fields[0] = record.replaced_invalid_utf8 ? std::move(replaced) : std::string(line);
    return scan;
  }
  if (parse_flat_object(line, field_names_, record.fields)) return scan;
  // Invalid UTF-8 reads as U+FFFD, as in CSV files (README "Invalid UTF-8"); then the line is parsed again.
  std::string replaced;
  if (replace_invalid_utf8(line, replaced)) {
    record.replaced_invalid_utf8 = true;
    line = replaced;
    if (parse_flat_object(line, field_names_, record.fields)) return scan;
  }
  // Not a flat object, or not valid JSON: nlohmann decides, and words the error (Note [Flat JSON fast path]).
  extract_with_nlohmann(line, field_names_, record);
  return scan;
}

}  // namespace hpctrain::data::detail
