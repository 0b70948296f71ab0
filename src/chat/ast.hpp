// Private: the syntax tree of a chat template (what jinja2/parser.py builds, for the constructs supported), and
// the parser that builds it from tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/lexer.hpp"
#include "chat/value.hpp"

namespace hpctrain::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  constant,   // literal: value
  name,       // name
  getattr,    // subject.name
  getitem,    // subject[args[0]]
  slice,      // subject[args[0]:args[1]:args[2]] (null entries are omitted bounds)
  call,       // subject(args, keywords)
  filter,     // subject | name(args, keywords); subject null inside {% filter %} / {% set x | f %}
  test,       // subject is name(args, keywords)
  logical_not,
  negate,
  plus,
  binary,     // args[0] op args[1]
  compare,    // args[0] compare_ops[0] args[1] compare_ops[1] args[2] ...
  logical_and,
  logical_or,
  conditional,  // args[0] if args[1] else args[2] (args[2] null: undefined)
  list,
  tuple,
  dict,       // args: key, value, key, value, ...
  concat,     // args[0] ~ args[1] ~ ...
};

enum class BinaryOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge, in, not_in };

struct Expr {
  ExprKind kind = ExprKind::constant;
  int line = 0;
  Value value;            // constant
  std::string name;       // name, attribute, filter or test name
  ExprPtr subject;        // getattr, getitem, slice, call, filter, test, unary operators
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  BinaryOp binary = BinaryOp::add;
  std::vector<CompareOp> compare_ops;
};

// An assignment target: a name, names to unpack (`a, b`), or a namespace attribute (`ns.attr`).
struct Target {
  std::vector<std::string> names;  // one, or several to unpack
  bool unpack = false;
  std::string attribute;           // ns.attr: names[0] is the namespace
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind : uint8_t {
  text,          // template text
  output,        // {{ expr }}
  if_,           // branches: (condition, body)..., else_body
  for_,          // for target in expr [if condition]: body else else_body
  set,           // set target = expr
  set_block,     // set target [| filter]: body
  macro,         // macro name(params = defaults): body
  call_block,    // call(params) expr: body
  filter_block,  // filter f: body
  with,          // with targets = values: body
  generation,    // generation: body
  break_,
  continue_,
};

struct Stmt {
  StmtKind kind = StmtKind::text;
  int line = 0;
  std::string text;                                  // text; macro name
  ExprPtr expr;                                      // output, set value, for iterable, call expression, filter
  ExprPtr condition;                                 // for ... if condition
  Target target;                                     // set, set_block, for
  std::vector<std::pair<ExprPtr, Body>> branches;    // if / elif
  Body body;
  Body else_body;
  std::vector<std::string> params;                   // macro / call block parameters
  std::vector<ExprPtr> defaults;                     // defaults of the last params
  std::vector<std::pair<Target, ExprPtr>> bindings;  // with
  // Macro / call block: whether the body reads `caller`, `varargs` or `kwargs` (Jinja decides extra arguments by it).
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

// Parses the tokens of template `name` (for errors). Throws Error naming the template and line for a syntax error
// or a construct that is not supported (include, import, extends, block, recursive loops, *args in calls, ...).
[[nodiscard]] Body parse(const std::vector<Token>& tokens, const std::string& name);

// Calls visit(expr) on every expression of `body`, sub-expressions included, statements nested at any depth.
void visit_expressions(const Body& body, const std::function<void(const Expr&)>& visit);

// Whether a body holds a {% generation %} block anywhere.
[[nodiscard]] bool has_generation(const Body& body);

}  // namespace hpctrain::chat
