// Jinja's built-in filters as jinja2/filters.py defines them (with autoescape off, as transformers renders), and
// transformers' tojson (renderer.hpp). Each takes the value as jinja2 passes it: an undefined value reads as an
// empty string or sequence where Python's str() / iter() / len() would.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <unordered_map>

#include "chat/objects.hpp"
#include "chat/pystr.hpp"
#include "chat/renderer.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/utf8.hpp"

#include <utf8proc.h>

namespace hpctrain::chat {
namespace {

using Filter = Value (*)(Renderer&, const Value&, CallArgs&, int);

Value text(std::string s) { return Value(Json(std::move(s))); }
Value generator(std::vector<Value> items) { return Value(std::make_shared<GeneratorObject>(std::move(items))); }

bool flag(const std::optional<Value>& value, bool fallback) { return value ? truthy(*value) : fallback; }

int64_t int_arg(Renderer& r, const std::optional<Value>& value, int64_t fallback, const char* what, int line) {
  if (!value) return fallback;
  if (!value->is_int() && !value->is_bool()) r.error(line, "{}: expected an integer, got {}", what, type_name(*value));
  return as_int(value->data());
}

// soft_str: the value as a string (an undefined value as "").
std::string soft_str(const Value& value) { return str(value); }

// len(value)
int64_t length_of(Renderer& r, const Value& value, int line) {
  if (value.is_undefined()) return 0;
  if (value.is_string()) return py::length(value.string());
  if (value.is_list() || value.is_dict()) return static_cast<int64_t>(value.data().size());
  if (auto* loop = dynamic_cast<LoopObject*>(value.object())) return static_cast<int64_t>(loop->items().size());
  r.error(line, "object of type '{}' has no len()", type_name(value));
}

// make_attrgetter: "a.b.0" looked up part by part with the sandbox's item access; `fallback` replaces an undefined
// result at any step.
Value attribute_of(Renderer& r, Value item, const Value& attribute, const std::optional<Value>& fallback, int line) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const auto& part : py::split(attribute.string(), std::string("."), -1, false)) {
      const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits ? Value(Json(std::stoll(part))) : Value(Json(part)));
    }
  } else {
    parts.push_back(attribute);
  }
  for (const auto& part : parts) {
    item = r.getitem(item, part, line);
    if (fallback && !fallback->is_none() && item.is_undefined()) item = *fallback;
  }
  return item;
}

// ignore_case: strings lower-cased for comparisons.
Value ignore_case(const Value& value) { return value.is_string() ? Value(Json(py::lower(value.string()))) : value; }

// Python's sorted(items, key=..., reverse=...): stable; ties keep their order either way.
void sort_values(Renderer& r, std::vector<std::pair<Value, Value>>& keyed, bool reverse, int line) {
  try {
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
      return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
    });
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& failure) {
    r.error(line, "{}", failure.what());
  }
}

// ---- the filters ----

Value f_abs(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "abs", line);
  if (v.is_undefined()) r.undefined_error(line, v);
  if (!v.is_number()) r.error(line, "bad operand type for abs(): '{}'", type_name(v));
  if (v.is_float()) return Value(Json(std::fabs(v.data().get<double>())));
  const int64_t n = as_int(v.data());
  if (n == INT64_MIN) r.unsupported(line, "integer overflow in abs()");
  return Value(Json(n < 0 ? -n : n));
}

Value f_attr(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"name"}, "attr", line);
  if (!a[0] || !a[0]->is_string()) r.error(line, "attr(): expected an attribute name");
  if (v.is_object()) return v.object()->attribute(a[0]->string());
  if (v.is_undefined()) r.undefined_error(line, v);
  if (method_kind(v, a[0]->string()) != MethodKind::none) return r.getattr(v, a[0]->string(), line);
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", type_name(v), a[0]->string()));
}

Value f_batch(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"linecount", "fill_with"}, "batch", line);
  const int64_t count = int_arg(r, a[0], 0, "batch", line);
  if (count <= 0) r.error(line, "batch(): the line count must be positive");
  std::vector<Value> batches;
  std::vector<Value> current;
  for (auto& item : r.iterate(v, line)) {
    if (static_cast<int64_t>(current.size()) == count) batches.push_back(r.make_list(std::exchange(current, {}), line));
    current.push_back(std::move(item));
  }
  if (!current.empty()) {
    if (a[1] && !a[1]->is_none())
      while (static_cast<int64_t>(current.size()) < count) current.push_back(*a[1]);
    batches.push_back(r.make_list(std::move(current), line));
  }
  return generator(std::move(batches));
}

Value f_capitalize(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "capitalize", line);
  return text(py::capitalize(soft_str(v)));
}

Value f_center(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"width"}, "center", line);
  const std::string s = soft_str(v);
  const int64_t width = int_arg(r, a[0], 80, "center", line), n = py::length(s);
  if (width <= n) return text(s);
  r.check_size(line, static_cast<std::size_t>(width));
  const int64_t pad = width - n, left = pad / 2 + (pad & width & 1);
  return text(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(pad - left), ' '));
}

Value f_length(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "length", line);
  return Value(Json(length_of(r, v, line)));
}

Value f_default(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"default_value", "boolean"}, "default", line);
  if (v.is_undefined() || (flag(a[1], false) && !truthy(v))) return a[0] ? *a[0] : text("");
  return v;
}

Value f_dictsort(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"case_sensitive", "by", "reverse"}, "dictsort", line);
  if (v.is_undefined()) r.undefined_error(line, v);
  if (!v.is_dict()) r.error(line, "dictsort: '{}' object has no attribute 'items'", type_name(v));
  std::size_t position = 0;
  if (a[1]) {
    if (a[1]->is_string() && a[1]->string() == "value") position = 1;
    else if (!a[1]->is_string() || a[1]->string() != "key") r.error(line, "You can only sort by either \"key\" or \"value\"");
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [key, item] : v.data().items()) {
    Json pair = Json::array({key, item});
    Value sort_key = position == 0 ? Value(Json(key)) : v.child(item);
    if (!flag(a[0], false)) sort_key = ignore_case(sort_key);
    keyed.emplace_back(std::move(sort_key), Value::tuple(std::move(pair)));
  }
  sort_values(r, keyed, flag(a[2], false), line);
  Json out = Json::array();
  for (const auto& [key, pair] : keyed) out.push_back(pair.data());
  return out.empty() ? Value(std::move(out)) : Value::tuple_list(std::move(out));
}

Value f_escape(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "escape", line);
  if (v.is_markup()) return v;
  return Value::markup(py::html_escape(v.is_undefined() ? std::string() : str(v)));
}

Value f_first(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "first", line);
  if (v.is_list() && !v.data().empty()) return v.child(v.data()[0]);
  std::vector<Value> items = r.iterate(v, line);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "last", line);
  if (v.is_object() && !dynamic_cast<LoopObject*>(v.object())) r.error(line, "'{}' object is not reversible", type_name(v));
  if (v.is_list() && !v.data().empty()) return v.child(v.data().back());
  std::vector<Value> items = r.iterate(v, line);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

// float(x) of a string as Python parses it (surrounding whitespace, "inf", "nan", underscores between digits).
std::optional<double> parse_float(const std::string& s) {
  const std::string trimmed = py::strip(s, std::nullopt, true, true);
  if (trimmed.empty() || !py::is_ascii(trimmed)) return std::nullopt;
  std::string digits;
  for (std::size_t i = 0; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (c == '_') {
      const bool between = i > 0 && i + 1 < trimmed.size() && std::isdigit(static_cast<unsigned char>(trimmed[i - 1])) &&
                           std::isdigit(static_cast<unsigned char>(trimmed[i + 1]));
      if (!between) return std::nullopt;
      continue;
    }
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-' ||
          std::isalpha(static_cast<unsigned char>(c))))
      return std::nullopt;
    digits += c;
  }
  std::string lower = py::lower(digits);
  const std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double value = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -value : value;
  }
  if (std::any_of(body.begin(), body.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)) && c != 'e'; }))
    return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size()) return std::nullopt;
  return value;
}

Value f_float(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"default"}, "float", line);
  const Value fallback = a[0] ? *a[0] : Value(Json(0.0));
  if (v.is_number()) return Value(Json(as_double(v.data())));
  if (v.is_string())
    if (const auto parsed = parse_float(v.string())) return Value(Json(*parsed));
  return fallback;
}

Value f_format(Renderer& r, const Value& v, CallArgs& args, int line) {
  if (!args.keyword.empty()) r.unsupported(line, "the format filter with keyword arguments");
  Json items = Json::array();
  for (const auto& arg : args.positional) items.push_back(r.to_json(arg, line));
  return percent_format(r, soft_str(v), Value::tuple(std::move(items)), line);
}

Value f_indent(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"width", "first", "blank"}, "indent", line);
  std::string indention = "    ";
  if (a[0]) indention = a[0]->is_string() ? a[0]->string() : std::string(static_cast<std::size_t>(std::max<int64_t>(0, int_arg(r, a[0], 4, "indent", line))), ' ');
  const std::string s = soft_str(v) + "\n";
  const std::vector<std::string> lines = py::splitlines(s, false);
  std::string out;
  if (flag(a[2], false)) {
    for (std::size_t i = 0; i < lines.size(); ++i) out += (i > 0 ? "\n" + indention : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (std::size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? lines[i] : indention + lines[i]);
  }
  if (flag(a[1], false)) out = indention + out;
  r.check_size(line, out.size());
  return text(std::move(out));
}

// int(x): Python's int(value, base) for strings, int(float(value)) as Jinja's fallback.
Value f_int(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"default", "base"}, "int", line);
  const Value fallback = a[0] ? *a[0] : Value(Json(0));
  if (a[1] && int_arg(r, a[1], 10, "int", line) != 10) r.unsupported(line, "the int filter with a base other than 10");
  if (v.is_bool() || v.is_int()) return Value(Json(as_int(v.data())));
  if (v.is_float()) {
    const double d = v.data().get<double>();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(Json(static_cast<int64_t>(std::trunc(d))));
  }
  if (v.is_string()) {
    std::string s = py::strip(v.string(), std::nullopt, true, true);
    std::string digits;
    bool ok = !s.empty();
    for (std::size_t i = 0; i < s.size() && ok; ++i) {
      const char c = s[i];
      if (i == 0 && (c == '+' || c == '-')) digits += c;
      else if (c >= '0' && c <= '9') digits += c;
      else if (c == '_' && i > 0 && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i - 1])) && std::isdigit(static_cast<unsigned char>(s[i + 1]))) continue;
      else ok = false;
    }
    if (ok && digits != "+" && digits != "-") {
      errno = 0;
      const long long n = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) r.unsupported(line, "the integer {} (larger than 64 bits)", digits);
      return Value(Json(static_cast<int64_t>(n)));
    }
    if (const auto parsed = parse_float(v.string()); parsed && std::isfinite(*parsed) && std::fabs(*parsed) < 9.2e18)
      return Value(Json(static_cast<int64_t>(std::trunc(*parsed))));
  }
  return fallback;
}

Value f_items(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "items", line);
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) r.error(line, "Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [key, item] : v.data().items()) pairs.push_back(Value::tuple(Json::array({key, item})));
  return generator(std::move(pairs));
}

Value f_join(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"d", "attribute"}, "join", line);
  const std::string separator = a[0] ? str(*a[0]) : std::string();
  std::string out;
  bool first = true;
  for (const auto& item : r.iterate(v, line)) {
    if (!first) out += separator;
    first = false;
    append_str(out, a[1] && !a[1]->is_none() ? attribute_of(r, item, *a[1], std::nullopt, line) : item);
    r.check_size(line, out.size());
  }
  return text(std::move(out));
}

Value f_list(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "list", line);
  if (v.is_list() && !v.is_tuple() && !v.is_view()) return v;
  return r.make_list(r.iterate(v, line), line);
}

Value f_lower(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "lower", line);
  return text(py::lower(soft_str(v)));
}

Value f_upper(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "upper", line);
  return text(py::upper(soft_str(v)));
}

// Jinja's title: each word (split at runs of '-', whitespace, '(', '{', '[', '<') upper-cased first, then lower.
Value f_title(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "title", line);
  const std::u32string s = py::decode(soft_str(v));
  const auto separator = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::is_space(c); };
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    const bool sep = separator(s[i]);
    std::size_t j = i;
    while (j < s.size() && separator(s[j]) == sep) ++j;
    const std::string head = py::encode(std::u32string_view(s).substr(i, 1));
    out += py::upper(head) + py::lower(py::encode(std::u32string_view(s).substr(i + 1, j - i - 1)));
    i = j;
  }
  return text(std::move(out));
}

Value f_trim(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"chars"}, "trim", line);
  std::optional<std::string> chars;
  if (a[0] && !a[0]->is_none()) {
    if (!a[0]->is_string()) r.error(line, "strip arg must be None or str");
    chars = a[0]->string();
  }
  return text(py::strip(soft_str(v), chars, true, true));
}

// map(filter, *args, **kwargs) or map(attribute=..., default=...)
Value f_map(Renderer& r, const Value& v, CallArgs& args, int line) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    std::optional<Value> attribute, fallback;
    for (const auto& [key, value] : args.keyword) {
      if (key == "attribute") attribute = value;
      else if (key == "default") fallback = value;
      else r.error(line, "Unexpected keyword argument '{}'", key);
    }
    if (!attribute) r.error(line, "map requires a filter argument");
    for (const auto& item : r.iterate(v, line)) out.push_back(attribute_of(r, item, *attribute, fallback, line));
    return generator(std::move(out));
  }
  if (!args.positional[0].is_string()) r.error(line, "map: the filter name must be a string");
  const std::string name = args.positional[0].string();
  if (filter_support(name) != Support::supported) r.unsupported(line, "map('{}'): no such filter in hpctrain", name);
  for (const auto& item : r.iterate(v, line)) {
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    rest.keyword = args.keyword;
    out.push_back(apply_filter(r, name, item, rest, line));
  }
  return generator(std::move(out));
}

Value min_or_max(Renderer& r, const Value& v, CallArgs& args, int line, bool maximum) {
  const auto a = bind_args(r, args, {"case_sensitive", "attribute"}, maximum ? "max" : "min", line);
  std::vector<Value> items = r.iterate(v, line);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const auto key = [&](const Value& item) {
    Value k = a[1] && !a[1]->is_none() ? attribute_of(r, item, *a[1], std::nullopt, line) : item;
    return flag(a[0], false) ? k : ignore_case(k);
  };
  std::size_t best = 0;
  Value best_key = key(items[0]);
  for (std::size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    int order = 0;
    try {
      order = compare(k, best_key);
    } catch (const Error& failure) {
      r.error(line, "{}", failure.what());
    }
    if (maximum ? order > 0 : order < 0) best = i, best_key = std::move(k);
  }
  return items[best];
}

Value f_max(Renderer& r, const Value& v, CallArgs& args, int line) { return min_or_max(r, v, args, line, true); }
Value f_min(Renderer& r, const Value& v, CallArgs& args, int line) { return min_or_max(r, v, args, line, false); }

// select / reject / selectattr / rejectattr (jinja2's select_or_reject).
Value select_or_reject(Renderer& r, const Value& v, CallArgs& args, int line, bool keep_if, bool lookup_attr) {
  if (!truthy(v)) return generator({});
  std::size_t offset = 0;
  std::optional<Value> attribute;
  if (lookup_attr) {
    if (args.positional.empty()) r.error(line, "Missing parameter for attribute name");
    attribute = args.positional[0];
    offset = 1;
  }
  std::optional<std::string> test;
  if (args.positional.size() > offset) {
    if (!args.positional[offset].is_string()) r.error(line, "the test name must be a string");
    test = args.positional[offset].string();
    if (test_support(*test) != Support::supported) r.unsupported(line, "the test '{}' in a select filter", *test);
  }
  std::vector<Value> out;
  for (auto& item : r.iterate(v, line)) {
    const Value subject = attribute ? attribute_of(r, item, *attribute, std::nullopt, line) : item;
    bool result = false;
    if (test) {
      CallArgs rest;
      rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(offset) + 1, args.positional.end());
      rest.keyword = args.keyword;
      result = apply_test(r, *test, subject, rest, line);
    } else {
      result = truthy(subject);
    }
    if (result == keep_if) out.push_back(std::move(item));
  }
  return generator(std::move(out));
}

Value f_select(Renderer& r, const Value& v, CallArgs& args, int line) { return select_or_reject(r, v, args, line, true, false); }
Value f_reject(Renderer& r, const Value& v, CallArgs& args, int line) { return select_or_reject(r, v, args, line, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& args, int line) { return select_or_reject(r, v, args, line, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& args, int line) { return select_or_reject(r, v, args, line, false, true); }

Value f_replace(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"old", "new", "count"}, "replace", line);
  if (!a[0] || !a[1]) r.error(line, "replace() needs the old and the new string");
  const int64_t count = a[2] && !a[2]->is_none() ? int_arg(r, a[2], -1, "replace", line) : -1;
  const std::string old = str(*a[0]), replacement = str(*a[1]), s = soft_str(v);
  const int64_t occurrences = old.empty() ? py::length(s) + 1 : py::count(s, old);
  const int64_t done = count < 0 ? occurrences : std::min(count, occurrences);
  r.check_size(line, s.size() + static_cast<std::size_t>(done) * replacement.size());
  return text(py::replace(s, old, replacement, count));
}

Value f_reverse(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "reverse", line);
  if (v.is_string()) return text(py::slice(v.string(), py::slice_indices(std::nullopt, std::nullopt, -1, py::length(v.string()))));
  std::vector<Value> items = r.iterate(v, line);
  std::reverse(items.begin(), items.end());
  return generator(std::move(items));
}

Value f_round(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"precision", "method"}, "round", line);
  const int64_t precision = int_arg(r, a[0], 0, "round", line);
  const std::string method = a[1] ? str(*a[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor") r.error(line, "method must be common, ceil or floor");
  if (v.is_undefined()) r.undefined_error(line, v);
  if (!v.is_number()) r.error(line, "type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (!v.is_float()) return Value(Json(as_int(v.data())));  // round(int, n) stays an int (n >= 0)
    return Value(Json(py::round_float(v.data().get<double>(), precision)));
  }
  if (precision != 0) r.unsupported(line, "round(precision, '{}') with a precision other than 0", method);
  const double d = as_double(v.data());
  const double rounded = method == "ceil" ? std::ceil(d) : std::floor(d);
  // math.ceil / math.floor give ints; dividing by 10**0 (an int) gives a float.
  return Value(Json(rounded));
}

Value f_safe(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "safe", line);
  return Value::markup(str(v));
}

Value f_sort(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"reverse", "case_sensitive", "attribute"}, "sort", line);
  std::vector<std::pair<Value, Value>> keyed;
  std::vector<Value> attributes;
  if (a[2] && a[2]->is_string())
    for (const auto& part : py::split(a[2]->string(), std::string(","), -1, false)) attributes.emplace_back(Json(part));
  else if (a[2] && !a[2]->is_none())
    attributes.push_back(*a[2]);
  for (auto& item : r.iterate(v, line)) {
    Json key = Json::array();
    for (const auto& attribute : attributes) {
      Value k = attribute_of(r, item, attribute, std::nullopt, line);
      key.push_back(r.to_json(flag(a[1], false) ? k : ignore_case(k), line));
    }
    if (attributes.empty()) key.push_back(r.to_json(flag(a[1], false) ? item : ignore_case(item), line));
    keyed.emplace_back(Value(std::move(key)), std::move(item));
  }
  sort_values(r, keyed, flag(a[0], false), line);
  std::vector<Value> out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return r.make_list(std::move(out), line);
}

Value f_string(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "string", line);
  if (v.is_string()) return v;
  return text(str(v));
}

Value f_sum(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"attribute", "start"}, "sum", line);
  Value total = a[1] ? *a[1] : Value(Json(0));
  for (const auto& item : r.iterate(v, line)) {
    const Value term = a[0] && !a[0]->is_none() ? attribute_of(r, item, *a[0], std::nullopt, line) : item;
    if (!total.is_number() || !term.is_number())
      r.error(line, "unsupported operand type(s) for +: '{}' and '{}'", type_name(total), type_name(term));
    if (total.is_float() || term.is_float()) {
      total = Value(Json(as_double(total.data()) + as_double(term.data())));
    } else {
      int64_t sum = 0;
      if (__builtin_add_overflow(as_int(total.data()), as_int(term.data()), &sum)) r.unsupported(line, "integer overflow in sum()");
      total = Value(Json(sum));
    }
  }
  return total;
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
Value f_tojson(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson", line);
  if (!v.is_data()) r.error(line, "Object of type {} is not JSON serializable", type_name(v));
  DumpOptions options;
  options.ensure_ascii = flag(a[0], false);
  options.sort_keys = flag(a[3], false);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) options.indent = a[1]->string();
    else options.indent = std::string(static_cast<std::size_t>(std::max<int64_t>(0, int_arg(r, a[1], 0, "tojson indent", line))), ' ');
    options.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const std::vector<Value> parts = r.iterate(*a[2], line);
    if (parts.size() != 2 || !parts[0].is_string() || !parts[1].is_string()) r.error(line, "tojson: separators must be two strings");
    options.item_separator = parts[0].string();
    options.key_separator = parts[1].string();
  }
  std::string out = dump_json(v.data(), options);
  r.check_size(line, out.size());
  r.step(line, out.size());
  return text(std::move(out));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& args, int line) {
  const auto a = bind_args(r, args, {"case_sensitive", "attribute"}, "unique", line);
  std::vector<Value> seen, out;
  for (auto& item : r.iterate(v, line)) {
    Value key = a[1] && !a[1]->is_none() ? attribute_of(r, item, *a[1], std::nullopt, line) : item;
    if (!flag(a[0], false)) key = ignore_case(key);
    if (key.is_list() || key.is_dict()) r.error(line, "unhashable type: '{}'", type_name(key));
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) continue;
    seen.push_back(std::move(key));
    out.push_back(std::move(item));
  }
  return generator(std::move(out));
}

Value f_wordcount(Renderer& r, const Value& v, CallArgs& args, int line) {
  (void)bind_args(r, args, {}, "wordcount", line);
  const std::string s = soft_str(v);
  int64_t words = 0;
  bool in_word = false;
  std::size_t pos = 0;
  while (pos < s.size()) {
    const char32_t c = tokenize::utf8::decode(s, pos);
    const auto k = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool word = c == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                      (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value(Json(words));
}

const std::unordered_map<std::string, Filter>& filters() {
  static const std::unordered_map<std::string, Filter> table = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},     {"capitalize", f_capitalize},
      {"center", f_center},     {"count", f_length},      {"d", f_default},       {"default", f_default},
      {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},   {"first", f_first},
      {"float", f_float},       {"format", f_format},     {"indent", f_indent},   {"int", f_int},
      {"items", f_items},       {"join", f_join},         {"last", f_last},       {"length", f_length},
      {"list", f_list},         {"lower", f_lower},       {"map", f_map},         {"max", f_max},
      {"min", f_min},           {"reject", f_reject},     {"rejectattr", f_rejectattr},
      {"replace", f_replace},   {"reverse", f_reverse},   {"round", f_round},     {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr},                     {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},     {"tojson", f_tojson},
      {"trim", f_trim},         {"unique", f_unique},     {"upper", f_upper},     {"wordcount", f_wordcount},
  };
  return table;
}

}  // namespace

Support filter_support(const std::string& name) {
  if (filters().count(name) > 0) return Support::supported;
  static const char* const kJinjaOnly[] = {"filesizeformat", "forceescape", "groupby", "pprint", "random", "slice",
                                           "striptags", "truncate", "urlencode", "urlize", "wordwrap", "xmlattr"};
  for (const char* other : kJinjaOnly)
    if (name == other) return Support::unsupported;
  return Support::unknown;
}

Value apply_filter(Renderer& renderer, const std::string& name, const Value& subject, CallArgs& args, int line) {
  const auto found = filters().find(name);
  if (found == filters().end()) renderer.unsupported(line, "the filter '{}'", name);
  return found->second(renderer, subject, args, line);
}

}  // namespace hpctrain::chat
