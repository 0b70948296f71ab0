// Namespaces, loops and macros (objects.hpp), and argument binding.
#include "chat/objects.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {

std::vector<std::optional<Value>> bind_args(Renderer& renderer, const CallArgs& args,
                                            std::initializer_list<const char*> names, const char* what, int line) {
  const std::vector<const char*> params(names);
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size())
    renderer.error(line, "{} takes at most {} argument(s), got {}", what, params.size(), args.positional.size());
  for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    while (i < params.size() && key != params[i]) ++i;
    if (i == params.size()) renderer.error(line, "{} got an unexpected keyword argument '{}'", what, key);
    if (bound[i]) renderer.error(line, "{} got multiple values for argument '{}'", what, key);
    bound[i] = value;
  }
  return bound;
}

// ---- namespace ----

std::string NamespaceObject::str() const {
  std::string out = "<Namespace {";
  for (std::size_t i = 0; i < attributes_.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr(Value(Json(attributes_[i].first))) + ": " + repr(attributes_[i].second);
  }
  return out + "}>";
}

Value NamespaceObject::attribute(const std::string& name) const {
  for (const auto& [key, value] : attributes_)
    if (key == name) return value;
  return Value::undefined(fmt::format("'Namespace' object has no attribute '{}'", name));
}

void NamespaceObject::set(const std::string& name, Value value) {
  for (auto& [key, bound] : attributes_)
    if (key == name) {
      bound = std::move(value);
      return;
    }
  attributes_.emplace_back(name, std::move(value));
}

// ---- loop ----

bool LoopObject::changed(const std::vector<Value>& values) {
  if (last_changed_ && last_changed_->size() == values.size()) {
    bool same = true;
    for (std::size_t i = 0; i < values.size() && same; ++i) same = equal((*last_changed_)[i], values[i]);
    if (same) return false;
  }
  last_changed_ = values;
  return true;
}

Value LoopObject::attribute(const std::string& name) const {
  const auto length = static_cast<int64_t>(items_.size());
  const auto index0 = static_cast<int64_t>(index_);
  if (name == "index") return Value(Json(index0 + 1));
  if (name == "index0") return Value(Json(index0));
  if (name == "revindex") return Value(Json(length - index0));
  if (name == "revindex0") return Value(Json(length - index0 - 1));
  if (name == "first") return Value(Json(index0 == 0));
  if (name == "last") return Value(Json(index0 == length - 1));
  if (name == "length") return Value(Json(length));
  if (name == "depth") return Value(Json(depth_));
  if (name == "depth0") return Value(Json(depth_ - 1));
  if (name == "previtem")
    return index0 > 0 ? items_[index_ - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return index0 + 1 < length ? items_[index_ + 1] : Value::undefined("there is no next item");
  auto self = std::const_pointer_cast<LoopObject>(shared_from_this());
  if (name == "cycle") {
    return Value(std::make_shared<FunctionObject>("cycle", [self](Renderer& r, CallArgs& args, int line) {
      if (!args.keyword.empty()) r.error(line, "loop.cycle() takes no keyword arguments");
      if (args.positional.empty()) r.error(line, "no items for cycling given");
      return args.positional[self->index() % args.positional.size()];
    }));
  }
  if (name == "changed") {
    return Value(std::make_shared<FunctionObject>("changed", [self](Renderer& r, CallArgs& args, int line) {
      if (!args.keyword.empty()) r.error(line, "loop.changed() takes no keyword arguments");
      return Value(Json(self->changed(args.positional)));
    }));
  }
  return Object::attribute(name);
}

// ---- macro ----

Value MacroObject::attribute(const std::string& name) const {
  if (name == "name") return Value(Json(name_));
  return Object::attribute(name);
}

Value MacroObject::call(Renderer& renderer, CallArgs& args, int line) {
  const Stmt& def = definition_;
  renderer.enter_call(line);
  struct Leave {
    Renderer& renderer;
    ~Leave() { renderer.leave_call(); }
  } leave{renderer};
  std::shared_ptr<Scope> closure = closure_.lock();
  if (closure == nullptr)
    renderer.error(line, "macro '{}' is called after the block that defined it has ended (not supported)", name_);
  auto scope = std::make_shared<Scope>(closure);
  const std::size_t n = def.params.size();
  std::vector<bool> given(n, false);
  Json varargs = Json::array();
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < n) {
      scope->set(def.params[i], args.positional[i]);
      given[i] = true;
    } else if (def.uses_varargs) {
      varargs.push_back(renderer.to_json(args.positional[i], line));
    } else {
      renderer.error(line, "macro '{}' takes not more than {} argument(s)", name_, n);
    }
  }
  Json kwargs = Json::object();
  Value caller = caller_;
  for (const auto& [key, value] : args.keyword) {
    std::size_t i = 0;
    while (i < n && def.params[i] != key) ++i;
    if (i < n) {
      if (given[i]) renderer.error(line, "macro '{}' got multiple values for argument '{}'", name_, key);
      scope->set(key, value);
      given[i] = true;
    } else if (key == "caller" && def.uses_caller) {
      caller = value;
    } else if (def.uses_kwargs) {
      kwargs[key] = renderer.to_json(value, line);
    } else {
      renderer.error(line, "macro '{}' takes no keyword argument '{}'", name_, key);
    }
  }
  // Defaults are evaluated in the macro's own scope, so they may read the parameters before them.
  const std::size_t first_default = n - def.defaults.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (given[i]) continue;
    scope->set(def.params[i], i >= first_default
                                  ? renderer.eval_in(*def.defaults[i - first_default], scope)
                                  : Value::undefined(fmt::format("parameter '{}' was not provided", def.params[i])));
  }
  if (def.uses_varargs) scope->set("varargs", Value::tuple(std::move(varargs)));
  if (def.uses_kwargs) scope->set("kwargs", Value(std::move(kwargs)));
  if (def.uses_caller) scope->set("caller", caller.is_undefined() ? Value::undefined("No caller defined") : caller);
  return Value(Json(renderer.capture(def.body, std::move(scope))));
}

}  // namespace hpctrain::chat
