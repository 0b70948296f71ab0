// Private: the values of a template that are not data (Note [Template values]): namespaces, loops, macros,
// built-in functions, bound methods and generators.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/renderer.hpp"

namespace hpctrain::chat {

// namespace(...): attributes that `{% set ns.attr = ... %}` changes in place.
class NamespaceObject final : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string str() const override;
  Value attribute(const std::string& name) const override;
  void set(const std::string& name, Value value);

 private:
  std::vector<std::pair<std::string, Value>> attributes_;
};

// `loop` inside a for loop.
class LoopObject final : public Object, public std::enable_shared_from_this<LoopObject> {
 public:
  LoopObject(std::vector<Value> items, int depth) : items_(std::move(items)), depth_(depth) {}
  std::string type_name() const override { return "LoopContext"; }
  Value attribute(const std::string& name) const override;
  void set_index(std::size_t index) { index_ = index; }
  [[nodiscard]] const std::vector<Value>& items() const { return items_; }
  [[nodiscard]] std::size_t index() const { return index_; }
  // loop.changed(*values): whether the values differ from those of its last call.
  bool changed(const std::vector<Value>& values);

 private:
  std::vector<Value> items_;
  std::size_t index_ = 0;
  int depth_ = 1;
  std::optional<std::vector<Value>> last_changed_;
};

// A macro, or the `caller` of a call block: a body with parameters, rendered in a fresh scope under `closure`.
// The closure is held weakly: the scope that defines a macro holds the macro, and a strong reference back would be a
// cycle that outlives the render (every template with a macro leaked it; found by fuzz_chat_template). A macro
// called after the block that defined it has ended is refused.
class MacroObject final : public Object {
 public:
  MacroObject(const Stmt& definition, std::string name, std::shared_ptr<Scope> closure, Value caller = Value())
      : definition_(definition), name_(std::move(name)), closure_(std::move(closure)), caller_(std::move(caller)) {}
  std::string type_name() const override { return "Macro"; }
  bool is_callable() const override { return true; }
  Value call(Renderer& renderer, CallArgs& args, int line) override;
  Value attribute(const std::string& name) const override;

 private:
  const Stmt& definition_;
  std::string name_;
  std::weak_ptr<Scope> closure_;
  Value caller_;  // a call block's caller, given to the macro it calls
};

// A built-in function (range, dict, namespace, raise_exception, strftime_now, loop.cycle, ...).
class FunctionObject final : public Object {
 public:
  using Function = std::function<Value(Renderer&, CallArgs&, int)>;
  FunctionObject(std::string name, Function function) : name_(std::move(name)), function_(std::move(function)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  bool is_callable() const override { return true; }
  Value call(Renderer& renderer, CallArgs& args, int line) override { return function_(renderer, args, line); }

 private:
  std::string name_;
  Function function_;
};

// A method of a data value, e.g. `message.get` (called through call_method).
class BoundMethodObject final : public Object {
 public:
  BoundMethodObject(Value receiver, std::string name) : receiver_(std::move(receiver)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  bool is_callable() const override { return true; }
  Value call(Renderer& renderer, CallArgs& args, int line) override {
    return call_method(renderer, receiver_, name_, args, line);
  }

 private:
  Value receiver_;
  std::string name_;
};

// What Jinja's map, select, reject, selectattr, rejectattr, unique and batch return: an iterator that yields its
// items once (a second pass yields nothing), has no len() and is always true.
class GeneratorObject final : public Object {
 public:
  explicit GeneratorObject(std::vector<Value> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "generator"; }
  // The items not consumed yet; the generator is empty afterwards.
  std::vector<Value> take() { return std::exchange(items_, {}); }

 private:
  std::vector<Value> items_;
};

}  // namespace hpctrain::chat
