// transformers' tojson filter: Python's json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False), byte for byte (renderer.hpp, dump_json): keys in insertion order, ", " / ": " separators (","
// between items with an indent), floats as Python's repr, NaN / Infinity as Python writes them.
#include <algorithm>
#include <cmath>

#include "chat/pystr.hpp"
#include "chat/renderer.hpp"
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::chat {
namespace {

void append_escaped(std::string& out, const std::string& text, bool ensure_ascii) {
  out += '"';
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      ++pos;
      switch (byte) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) out += fmt::format("\\u{:04x}", byte);
          else out += static_cast<char>(byte);
      }
      continue;
    }
    const std::size_t start = pos;
    const char32_t c = tokenize::utf8::decode(text, pos);
    if (!ensure_ascii) {
      out.append(text, start, pos - start);
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
    } else {
      const uint32_t v = static_cast<uint32_t>(c) - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    }
  }
  out += '"';
}

void append_float(std::string& out, double value) {
  if (std::isnan(value)) out += "NaN";
  else if (std::isinf(value)) out += value < 0 ? "-Infinity" : "Infinity";
  else out += py::float_repr(value);
}

class Dumper {
 public:
  explicit Dumper(const DumpOptions& options) : options_(options) {}

  void dump(std::string& out, const Json& data, int level) {
    switch (data.type()) {
      case Json::value_t::null: out += "null"; return;
      case Json::value_t::boolean: out += data.get<bool>() ? "true" : "false"; return;
      case Json::value_t::number_integer: out += std::to_string(data.get<int64_t>()); return;
      case Json::value_t::number_unsigned: out += std::to_string(data.get<uint64_t>()); return;
      case Json::value_t::number_float: append_float(out, data.get<double>()); return;
      case Json::value_t::string: append_escaped(out, data.get_ref<const std::string&>(), options_.ensure_ascii); return;
      case Json::value_t::array: {
        if (data.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (std::size_t i = 0; i < data.size(); ++i) {
          out += i == 0 ? newline(level + 1) : options_.item_separator + newline(level + 1);
          dump(out, data[i], level + 1);
        }
        out += newline(level) + "]";
        return;
      }
      case Json::value_t::object: {
        if (data.empty()) {
          out += "{}";
          return;
        }
        std::vector<std::pair<std::string, const Json*>> pairs;
        for (const auto& [key, value] : data.items()) pairs.emplace_back(key, &value);
        if (options_.sort_keys)
          std::stable_sort(pairs.begin(), pairs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        for (std::size_t i = 0; i < pairs.size(); ++i) {
          out += i == 0 ? newline(level + 1) : options_.item_separator + newline(level + 1);
          append_escaped(out, pairs[i].first, options_.ensure_ascii);
          out += options_.key_separator;
          dump(out, *pairs[i].second, level + 1);
        }
        out += newline(level) + "}";
        return;
      }
      default:
        out += "null";
    }
  }

 private:
  std::string newline(int level) const {
    if (!options_.indent) return "";
    std::string text = "\n";
    for (int i = 0; i < level; ++i) text += *options_.indent;
    return text;
  }

  const DumpOptions& options_;
};

}  // namespace

std::string dump_json(const Json& data, const DumpOptions& options) {
  std::string out;
  Dumper(options).dump(out, data, 0);
  return out;
}

}  // namespace hpctrain::chat
