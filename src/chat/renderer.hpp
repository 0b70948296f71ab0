// Private: the state of one rendering (scopes, output buffers, limits) and the tree walk over the syntax tree
// (renderer.cpp: statements, expressions.cpp: expressions). Filters, tests and methods (filters.cpp,
// jinja_tests.cpp, methods.cpp) get the Renderer for errors, limits and calls.
//
// Note [Jinja scopes]
// As jinja2 compiles templates: `{% set %}` at the top level or inside `if` binds in the enclosing scope; each
// iteration of a `for` loop, a macro call, a `with` block, a `{% set %}...{% endset %}` / `{% filter %}` body and a
// call block's `caller()` get a fresh scope whose parent is the scope they were written in, so what they bind is
// gone when they end (a namespace() object changes in place, which is how templates carry state out of a loop). A
// macro sees the scope it was defined in as it is when the macro is called (a variable set at the top level after
// the macro's definition is visible), not the scope of its caller.
#pragma once

#include <fmt/format.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/ast.hpp"
#include "chat/value.hpp"
#include "hpctrain/chat/template.hpp"

namespace hpctrain::chat {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  // The innermost binding of `name`, or null.
  [[nodiscard]] const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);  // binds in this scope
  [[nodiscard]] const std::shared_ptr<Scope>& parent() const { return parent_; }

 private:
  std::vector<std::pair<std::string, Value>> vars_;
  std::shared_ptr<Scope> parent_;
};

enum class Flow : uint8_t { normal, break_, continue_ };

class Renderer {
 public:
  Renderer(const std::string& name, const RenderOptions& options, std::shared_ptr<Scope> globals);

  // Renders the template's body into the result.
  Rendered run(const Body& body);

  // Errors, each naming the template and the line: what jinja2 raises while rendering (TemplateError), what the
  // template raised itself (raise_exception, TemplateError), and what hpctrain does not implement (Error).
  template <typename... Args>
  [[noreturn]] void error(int line, fmt::format_string<Args...> format, Args&&... args) const {
    throw_error(line, fmt::format(format, std::forward<Args>(args)...), true);
  }
  template <typename... Args>
  [[noreturn]] void unsupported(int line, fmt::format_string<Args...> format, Args&&... args) const {
    throw_error(line,
                "unsupported construct: " + fmt::format(format, std::forward<Args>(args)...) +
                    " (hpctrain's chat template engine refuses it rather than render a different text)",
                false);
  }
  [[noreturn]] void raised(int line, const std::string& message) const;
  [[noreturn]] void undefined_error(int line, const Value& undefined) const;
  // One unit of work at `line` (plus one per KiB of `bytes` copied); throws past RenderLimits::max_steps.
  void step(int line, std::size_t bytes = 0);
  // A string of `bytes` the template built; throws past RenderLimits::max_bytes.
  void check_size(int line, std::size_t bytes) const;
  // The same for computed data (the sum of its strings, and 16 bytes per value).
  void check_data(int line, const Json& data) const;

  // Expressions (expressions.cpp); eval_in evaluates in `scope` instead of the current one.
  [[nodiscard]] Value eval(const Expr& expr);
  [[nodiscard]] Value eval_in(const Expr& expr, std::shared_ptr<Scope> scope);
  [[nodiscard]] Value call(const Value& callee, CallArgs& args, int line);
  [[nodiscard]] Value getattr(const Value& subject, const std::string& name, int line);
  [[nodiscard]] Value getitem(const Value& subject, const Value& key, int line);
  // The items of an iterable (Python's iter()): a list's elements, a dict's keys, a string's characters, nothing
  // for an undefined value; Error for anything else.
  [[nodiscard]] std::vector<Value> iterate(const Value& value, int line);
  // A data value's JSON for storing inside a list or dict; Error for an undefined value or an object.
  [[nodiscard]] Json to_json(const Value& value, int line) const;
  [[nodiscard]] Value make_list(std::vector<Value> items, int line);

  // Statements (renderer.cpp).
  Flow exec(const Body& body);
  // Renders `body` in a fresh scope under `parent` into a string (macros, set blocks, filter blocks, caller()).
  [[nodiscard]] std::string capture(const Body& body, std::shared_ptr<Scope> scope);
  void write(int line, std::string_view text);

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] const RenderOptions& options() const { return options_; }
  [[nodiscard]] const std::shared_ptr<Scope>& scope() const { return scope_; }
  // Macro calls: the nesting depth, checked against the limit.
  void enter_call(int line);
  void leave_call() { --depth_; }

 private:
  [[noreturn]] void throw_error(int line, const std::string& message, bool template_error) const;
  [[nodiscard]] Value filter_chain(const Expr& chain, const Value& innermost);
  void exec_if(const Stmt& stmt);
  void exec_for(const Stmt& stmt);
  void exec_set(const Stmt& stmt);
  void exec_generation(const Stmt& stmt);
  void assign(const Target& target, const Value& value, int line);

  const std::string& name_;
  const RenderOptions& options_;
  std::shared_ptr<Scope> scope_;
  std::string output_;
  std::string* out_ = &output_;
  std::vector<GenerationSpan> spans_;
  int64_t steps_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

// Python's `format % values` (the `%` operator on a string, and the format filter), for %s %r %d %i %f %%.
[[nodiscard]] Value percent_format(Renderer& renderer, const std::string& format, const Value& values, int line);

// Python's `item in container` (Jinja's `in` operator and test).
[[nodiscard]] bool contains(Renderer& renderer, const Value& container, const Value& item, int line);

// Filters (filters.cpp) and tests (jinja_tests.cpp): whether the name is one, and applying it.
enum class Support : uint8_t { supported, unsupported, unknown };
[[nodiscard]] Support filter_support(const std::string& name);
[[nodiscard]] Value apply_filter(Renderer& renderer, const std::string& name, const Value& subject, CallArgs& args,
                                 int line);
[[nodiscard]] Support test_support(const std::string& name);
[[nodiscard]] bool apply_test(Renderer& renderer, const std::string& name, const Value& subject, CallArgs& args, int line);

// Methods of data values (methods.cpp): `message.get`, `text.strip`, ...: whether `name` is a method of the
// value's Python type (so attribute access yields it), whether the sandbox forbids it, and calling it.
enum class MethodKind : uint8_t { none, safe, unsafe };
[[nodiscard]] MethodKind method_kind(const Value& receiver, const std::string& name);
[[nodiscard]] Value call_method(Renderer& renderer, const Value& receiver, const std::string& name, CallArgs& args,
                                int line);

// transformers' tojson (json.dumps(x, ensure_ascii, indent, separators, sort_keys)) (tojson.cpp).
struct DumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // null: one line
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
[[nodiscard]] std::string dump_json(const Json& data, const DumpOptions& options);

// The template's globals beside the caller's variables: range, dict, namespace, raise_exception, strftime_now
// (builtins.cpp). One scope for every rendering (its functions hold no state), the parent of the variables'.
[[nodiscard]] const std::shared_ptr<Scope>& builtins();

// Arguments bound to a signature: `names` in order; positional arguments first, then keywords; an argument not
// given is nullopt. Error naming `what` for too many arguments or an unknown keyword.
[[nodiscard]] std::vector<std::optional<Value>> bind_args(Renderer& renderer, const CallArgs& args,
                                                          std::initializer_list<const char*> names, const char* what,
                                                          int line);

}  // namespace hpctrain::chat
