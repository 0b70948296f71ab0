// Methods of data values called from a template (`text.strip()`, `message.get('x')`, `items.index(3)`), as
// Python's str, dict and list define them; jinja2's ImmutableSandboxedEnvironment refuses the ones that modify a
// list or dict (renderer.hpp).
#include <algorithm>
#include <cstring>

#include "chat/objects.hpp"
#include "chat/pystr.hpp"
#include "chat/renderer.hpp"

namespace hpctrain::chat {
namespace {

bool one_of(const std::string& name, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

constexpr std::initializer_list<const char*> kStrMethods = {
    "capitalize", "casefold",  "center",     "count",      "encode",     "endswith",  "expandtabs", "find",
    "format",     "format_map", "index",     "isalnum",    "isalpha",    "isascii",   "isdecimal",  "isdigit",
    "isidentifier", "islower", "isnumeric",  "isprintable", "isspace",   "istitle",   "isupper",    "join",
    "ljust",      "lower",     "lstrip",     "maketrans",  "partition",  "removeprefix", "removesuffix", "replace",
    "rfind",      "rindex",    "rjust",      "rpartition", "rsplit",     "rstrip",    "split",      "splitlines",
    "startswith", "strip",     "swapcase",   "title",      "translate",  "upper",     "zfill"};

std::optional<std::string> string_arg(Renderer& r, const std::optional<Value>& value, const char* what, int line) {
  if (!value || value->is_none()) return std::nullopt;
  if (!value->is_string()) r.error(line, "{}: must be str or None, not {}", what, type_name(*value));
  return value->string();
}

std::optional<int64_t> method_int(Renderer& r, const std::optional<Value>& value, const char* what, int line) {
  if (!value || value->is_none()) return std::nullopt;
  if (!value->is_int() && !value->is_bool()) r.error(line, "{}: an integer is required, not {}", what, type_name(*value));
  return as_int(value->data());
}

Value string_value(std::string s) { return Value(Json(std::move(s))); }

Value string_list(const std::vector<std::string>& parts) {
  Json out = Json::array();
  for (const auto& part : parts) out.push_back(part);
  return Value(std::move(out));
}

// str.format with fields {}, {0}, {name} and an optional !s / !r conversion (no format specs).
Value format_string(Renderer& r, const std::string& format, CallArgs& args, int line) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if (c == '}') {
      if (i + 1 < format.size() && format[i + 1] == '}') ++i;
      else r.error(line, "Single '}}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < format.size() && format[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const std::size_t close = format.find('}', i);
    if (close == std::string::npos) r.error(line, "Single '{{' encountered in format string");
    std::string field = format.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 's';
    if (const std::size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size() || (field[bang + 1] != 's' && field[bang + 1] != 'r'))
        r.unsupported(line, "the format field '{{{}}}'", field);
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos) r.unsupported(line, "the format field '{{{}}}'", field);
    const Value* arg = nullptr;
    if (field.empty()) {
      if (auto_index >= args.positional.size()) r.error(line, "Replacement index {} out of range for positional args tuple", auto_index);
      arg = &args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const auto index = static_cast<std::size_t>(std::stoul(field));
      if (index >= args.positional.size()) r.error(line, "Replacement index {} out of range for positional args tuple", index);
      arg = &args.positional[index];
    } else {
      for (const auto& [key, value] : args.keyword)
        if (key == field) arg = &value;
      if (arg == nullptr) r.error(line, "'{}'", field);
    }
    if (conversion == 'r') out += repr(*arg);
    else append_str(out, *arg);
    r.check_size(line, out.size());
  }
  return string_value(std::move(out));
}

Value str_method(Renderer& r, const Value& receiver, const std::string& name, CallArgs& args, int line) {
  const std::string& s = receiver.string();
  const auto bind = [&](std::initializer_list<const char*> names) { return bind_args(r, args, names, name.c_str(), line); };
  if (receiver.is_markup() && !(one_of(name, {"startswith", "endswith", "find", "rfind", "count", "index", "rindex",
                                              "isalnum", "isalpha", "isdigit", "islower", "isupper", "isspace"}) ||
                                (args.positional.empty() && args.keyword.empty() &&
                                 one_of(name, {"strip", "lstrip", "rstrip", "lower", "upper", "title", "capitalize", "swapcase"}))))
    r.unsupported(line, "the method {}() of a string marked safe (Markup escapes its arguments)", name);
  const auto same_kind = [&](std::string result) { return receiver.is_markup() ? Value::markup(std::move(result)) : string_value(std::move(result)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const auto a = bind({"chars"});
    return same_kind(py::strip(s, string_arg(r, a[0], name.c_str(), line), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const auto a = bind({"sep", "maxsplit"});
    const auto sep = string_arg(r, a[0], name.c_str(), line);
    if (sep && sep->empty()) r.error(line, "empty separator");
    return string_list(py::split(s, sep, method_int(r, a[1], name.c_str(), line).value_or(-1), name == "rsplit"));
  }
  if (name == "splitlines") {
    const auto a = bind({"keepends"});
    return string_list(py::splitlines(s, a[0] && truthy(*a[0])));
  }
  if (name == "startswith" || name == "endswith") {
    const auto a = bind({"prefix", "start", "end"});
    if (!a[0]) r.error(line, "{}() takes at least 1 argument (0 given)", name);
    if (a[1] || a[2]) r.unsupported(line, "{}() with start or end", name);
    std::vector<std::string> candidates;
    if (a[0]->is_string()) {
      candidates.push_back(a[0]->string());
    } else if (a[0]->is_tuple()) {
      for (const auto& item : a[0]->data()) {
        if (!item.is_string()) r.error(line, "tuple for {} must only contain str", name);
        candidates.push_back(item.get<std::string>());
      }
    } else {
      r.error(line, "{} first arg must be str or a tuple of str, not {}", name, type_name(*a[0]));
    }
    for (const auto& c : candidates) {
      const bool hit = name == "startswith" ? s.compare(0, c.size(), c) == 0
                                            : s.size() >= c.size() && s.compare(s.size() - c.size(), c.size(), c) == 0;
      if (hit) return Value(Json(true));
    }
    return Value(Json(false));
  }
  if (name == "replace") {
    const auto a = bind({"old", "new", "count"});
    const auto old = string_arg(r, a[0], "replace", line), replacement = string_arg(r, a[1], "replace", line);
    if (!old || !replacement) r.error(line, "replace() needs two strings");
    const int64_t count = method_int(r, a[2], "replace", line).value_or(-1);
    const int64_t found = old->empty() ? py::length(s) + 1 : py::count(s, *old);
    r.check_size(line, s.size() + static_cast<std::size_t>(count < 0 ? found : std::min(count, found)) * replacement->size());
    return string_value(py::replace(s, *old, *replacement, count));
  }
  if (name == "lower") return (void)bind({}), same_kind(py::lower(s));
  if (name == "upper") return (void)bind({}), same_kind(py::upper(s));
  if (name == "title") return (void)bind({}), same_kind(py::title(s));
  if (name == "capitalize") return (void)bind({}), same_kind(py::capitalize(s));
  if (name == "swapcase") return (void)bind({}), same_kind(py::swapcase(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const auto a = bind({"sub", "start", "end"});
    const auto sub = string_arg(r, a[0], name.c_str(), line);
    if (!sub) r.error(line, "{}() needs a string", name);
    const int64_t at = py::find(s, *sub, method_int(r, a[1], name.c_str(), line), method_int(r, a[2], name.c_str(), line),
                                name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) r.error(line, "substring not found");
    return Value(Json(at));
  }
  if (name == "count") {
    const auto a = bind({"sub"});
    const auto sub = string_arg(r, a[0], "count", line);
    if (!sub) r.error(line, "count() needs a string");
    return Value(Json(py::count(s, *sub)));
  }
  if (name == "join") {
    const auto a = bind({"iterable"});
    if (!a[0]) r.error(line, "join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (const auto& item : r.iterate(*a[0], line)) {
      if (!item.is_string()) r.error(line, "sequence item: expected str instance, {} found", type_name(item));
      if (!first) out += s;
      first = false;
      out += item.string();
      r.check_size(line, out.size());
    }
    return string_value(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const auto a = bind({"affix"});
    const auto affix = string_arg(r, a[0], name.c_str(), line);
    if (!affix) r.error(line, "{}() needs a string", name);
    if (name == "removeprefix") return string_value(s.compare(0, affix->size(), *affix) == 0 ? s.substr(affix->size()) : s);
    const bool ends = s.size() >= affix->size() && s.compare(s.size() - affix->size(), affix->size(), *affix) == 0;
    return string_value(ends ? s.substr(0, s.size() - affix->size()) : s);
  }
  if (name == "format") return format_string(r, s, args, line);
  const std::pair<const char*, py::CharClass> predicates[] = {
      {"isdigit", py::CharClass::digit}, {"isalpha", py::CharClass::alpha}, {"isalnum", py::CharClass::alnum},
      {"isspace", py::CharClass::space}, {"islower", py::CharClass::lower}, {"isupper", py::CharClass::upper}};
  for (const auto& [predicate, what] : predicates)
    if (name == predicate) return (void)bind({}), Value(Json(py::all_of_class(s, what)));
  r.unsupported(line, "the string method {}()", name);
}

Value dict_method(Renderer& r, const Value& receiver, const std::string& name, CallArgs& args, int line) {
  const Json& dict = receiver.data();
  if (name == "get") {
    const auto a = bind_args(r, args, {"key", "default"}, "get", line);
    if (!a[0]) r.error(line, "get expected at least 1 argument, got 0");
    if (a[0]->is_string()) {
      const auto found = dict.find(a[0]->string());
      if (found != dict.end()) return receiver.child(*found);
    } else if (a[0]->is_list() || a[0]->is_dict()) {
      r.error(line, "unhashable type: '{}'", type_name(*a[0]));
    }
    return a[1] ? *a[1] : Value(Json(nullptr));
  }
  (void)bind_args(r, args, {}, name.c_str(), line);
  Json out = Json::array();
  if (name == "items") {
    for (const auto& [key, value] : dict.items()) out.push_back(Json::array({key, value}));
  } else if (name == "keys") {
    for (const auto& [key, value] : dict.items()) out.push_back(key);
  } else if (name == "values") {
    for (const auto& [key, value] : dict.items()) out.push_back(value);
  } else if (name == "copy") {
    return Value(dict);
  } else {
    r.unsupported(line, "the dict method {}()", name);
  }
  r.step(line, out.size() * 16);
  return Value::view(std::move(out), name == "items");
}

Value list_method(Renderer& r, const Value& receiver, const std::string& name, CallArgs& args, int line) {
  const Json& list = receiver.data();
  if (name == "copy") return (void)bind_args(r, args, {}, "copy", line), Value(list);
  const auto a = bind_args(r, args, {"value"}, name.c_str(), line);
  if (!a[0]) r.error(line, "{}() takes exactly one argument (0 given)", name);
  int64_t count = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!a[0]->is_data() || !equal_json(list[i], a[0]->data())) continue;
    if (name == "index") return Value(Json(static_cast<int64_t>(i)));
    ++count;
  }
  if (name == "index") r.error(line, "{} is not in list", repr(*a[0]));
  return Value(Json(count));
}

}  // namespace

MethodKind method_kind(const Value& receiver, const std::string& name) {
  if (!receiver.is_data()) return MethodKind::none;
  if (receiver.is_string()) return one_of(name, kStrMethods) ? MethodKind::safe : MethodKind::none;
  if (receiver.is_dict()) {
    if (one_of(name, {"copy", "fromkeys", "get", "items", "keys", "values"})) return MethodKind::safe;
    if (one_of(name, {"clear", "pop", "popitem", "setdefault", "update"})) return MethodKind::unsafe;
  }
  if (receiver.is_list()) {
    if (receiver.is_tuple()) return one_of(name, {"count", "index"}) ? MethodKind::safe : MethodKind::none;
    if (one_of(name, {"copy", "count", "index"})) return MethodKind::safe;
    if (one_of(name, {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"})) return MethodKind::unsafe;
  }
  return MethodKind::none;
}

Value call_method(Renderer& renderer, const Value& receiver, const std::string& name, CallArgs& args, int line) {
  if (receiver.is_string()) return str_method(renderer, receiver, name, args, line);
  if (receiver.is_dict()) return dict_method(renderer, receiver, name, args, line);
  if (receiver.is_list()) return list_method(renderer, receiver, name, args, line);
  renderer.unsupported(line, "the method {}() of a {}", name, type_name(receiver));
}

}  // namespace hpctrain::chat
