// The globals a chat template sees beside its variables (renderer.hpp, add_builtins): Jinja's range and the
// functions transformers adds (raise_exception, strftime_now, its dict and namespace).
#include <chrono>
#include <ctime>

#include "chat/objects.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

// jinja2.sandbox.MAX_RANGE: the sandbox refuses longer ranges.
constexpr int64_t kMaxRange = 100000;

int64_t int_argument(Renderer& r, const Value& value, const char* what, int line) {
  if (!value.is_int() && !value.is_bool())
    r.error(line, "'{}' object cannot be interpreted as an integer ({})", type_name(value), what);
  return as_int(value.data());
}

Value range(Renderer& r, CallArgs& args, int line) {
  if (!args.keyword.empty()) r.error(line, "range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) r.error(line, "range expected 1 to 3 arguments, got {}", p.size());
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = int_argument(r, p[0], "range", line);
  } else {
    start = int_argument(r, p[0], "range", line);
    stop = int_argument(r, p[1], "range", line);
    if (p.size() == 3) step = int_argument(r, p[2], "range", line);
  }
  if (step == 0) r.error(line, "range() arg 3 must not be zero");
  const int64_t count = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                                  : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (count > kMaxRange)
    r.error(line, "Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).", kMaxRange);
  Json out = Json::array();
  for (int64_t i = 0; i < count; ++i) out.push_back(start + i * step);
  r.step(line, static_cast<std::size_t>(count) * 16);
  return Value(std::move(out));
}

// dict(mapping or pairs, **kwargs)
Value make_dict(Renderer& r, CallArgs& args, int line) {
  Json out = Json::object();
  if (args.positional.size() > 1) r.error(line, "dict expected at most 1 argument, got {}", args.positional.size());
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (source.is_dict()) {
      out = source.data();
    } else {
      for (const Value& pair : r.iterate(source, line)) {
        const std::vector<Value> items = r.iterate(pair, line);
        if (items.size() != 2) r.error(line, "dictionary update sequence element has length {}; 2 is required", items.size());
        if (!items[0].is_string()) r.unsupported(line, "a dict key of type '{}'", type_name(items[0]));
        out[items[0].string()] = r.to_json(items[1], line);
      }
    }
  }
  for (const auto& [key, value] : args.keyword) out[key] = r.to_json(value, line);
  return Value(std::move(out));
}

// transformers' TemplateNamespace: jinja2's namespace() refusing attribute names that start with "_".
Value make_namespace(Renderer& r, CallArgs& args, int line) {
  auto ns = std::make_shared<NamespaceObject>();
  const auto check = [&](const std::string& name) {
    if (!name.empty() && name[0] == '_')
      r.error(line, "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'. Please rename the attribute.", name);
  };
  if (args.positional.size() > 1) r.error(line, "namespace expected at most 1 argument, got {}", args.positional.size());
  if (!args.positional.empty()) {
    const Value& source = args.positional[0];
    if (!source.is_dict()) r.unsupported(line, "namespace() of a {}", type_name(source));
    for (const auto& [key, item] : source.data().items()) {
      check(key);
      ns->set(key, source.child(item));
    }
  }
  for (const auto& [key, value] : args.keyword) {
    check(key);
    ns->set(key, value);
  }
  return Value(std::shared_ptr<Object>(ns));
}

Value raise_exception(Renderer& r, CallArgs& args, int line) {
  const auto bound = bind_args(r, args, {"message"}, "raise_exception()", line);
  r.raised(line, bound[0] ? str(*bound[0]) : std::string());
}

Value strftime_now(Renderer& r, CallArgs& args, int line) {
  const auto bound = bind_args(r, args, {"format"}, "strftime_now()", line);
  if (!bound[0] || !bound[0]->is_string()) r.error(line, "strftime_now() needs a format string");
  std::tm now{};
  if (r.options().now) {
    now = *r.options().now;
  } else {
    const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  const std::string& format = bound[0]->string();
  std::string out(format.size() * 8 + 64, '\0');
  const std::size_t written = std::strftime(out.data(), out.size(), format.c_str(), &now);
  if (written == 0 && !format.empty()) r.unsupported(line, "the strftime format '{}'", format);
  out.resize(written);
  return Value(Json(std::move(out)));
}

Value refused(const char* name, Renderer& r, int line) { r.unsupported(line, "the global function {}()", name); }

void add_all(Scope& globals) {
  const auto add = [&](const char* name, FunctionObject::Function function) {
    globals.set(name, Value(std::make_shared<FunctionObject>(name, std::move(function))));
  };
  add("range", range);
  add("dict", make_dict);
  add("namespace", make_namespace);
  add("raise_exception", raise_exception);
  add("strftime_now", strftime_now);
  for (const char* name : {"lipsum", "cycler", "joiner"})
    add(name, [name](Renderer& r, CallArgs&, int line) -> Value { return refused(name, r, line); });
}

}  // namespace

const std::shared_ptr<Scope>& builtins() {
  static const std::shared_ptr<Scope> scope = [] {
    auto globals = std::make_shared<Scope>(nullptr);
    add_all(*globals);
    return globals;
  }();
  return scope;
}


}  // namespace hpctrain::chat
