// Jinja's parser (ast.hpp): the grammar and operator precedence of jinja2/parser.py, for the statements of
// transformers' environment (the core tags, {% generation %}, and loopcontrols' break / continue).
#include <fmt/format.h>

#include <cerrno>
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "chat/ast.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : tokens_(tokens), name_(name) {}

  Body parse_template() {
    Body body = subparse({});
    if (current().type != TokenType::eof) error(current().line, "unexpected '{}'", describe(current()));
    return body;
  }

 private:
  template <typename... Args>
  [[noreturn]] void error(int line, fmt::format_string<Args...> format, Args&&... args) const {
    fail("{} line {}: {}", name_, line, fmt::format(format, std::forward<Args>(args)...));
  }

  template <typename... Args>
  [[noreturn]] void unsupported(int line, fmt::format_string<Args...> format, Args&&... args) const {
    fail("{} line {}: unsupported construct: {} (hpctrain's chat template engine refuses it rather than render "
         "a different text)", name_, line, fmt::format(format, std::forward<Args>(args)...));
  }

  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case TokenType::data: return "template data";
      case TokenType::variable_begin: return "begin of print statement";
      case TokenType::variable_end: return "end of print statement";
      case TokenType::block_begin: return "begin of statement block";
      case TokenType::block_end: return "end of statement block";
      case TokenType::eof: return "end of template";
      default: return token.value;
    }
  }

  bool is_name(const Token& token, const char* value) const {
    return token.type == TokenType::name && token.value == value;
  }
  bool is_op(const Token& token, const char* value) const { return token.type == TokenType::op && token.value == value; }

  bool skip_name(const char* value) {
    if (!is_name(current(), value)) return false;
    next();
    return true;
  }
  bool skip_op(const char* value) {
    if (!is_op(current(), value)) return false;
    next();
    return true;
  }

  const Token& expect(TokenType type, const char* what) {
    if (current().type != type) error(current().line, "expected {}, got '{}'", what, describe(current()));
    return next();
  }
  void expect_op(const char* value) {
    if (!is_op(current(), value)) error(current().line, "expected '{}', got '{}'", value, describe(current()));
    next();
  }
  void expect_name(const char* value) {
    if (!is_name(current(), value)) error(current().line, "expected '{}', got '{}'", value, describe(current()));
    next();
  }

  // ---- statements ----

  // Statements until a block whose first name is one of `end_names` (left current), or the end of the template.
  Body subparse(const std::vector<std::string>& end_names) {
    Body body;
    while (current().type != TokenType::eof) {
      const Token& token = current();
      if (token.type == TokenType::data) {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::text;
        stmt->line = token.line;
        stmt->text = token.value;
        body.push_back(std::move(stmt));
        next();
      } else if (token.type == TokenType::variable_begin) {
        next();
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = StmtKind::output;
        stmt->line = token.line;
        stmt->expr = parse_tuple(true, false, {});
        expect(TokenType::variable_end, "'}}'");
        body.push_back(std::move(stmt));
      } else if (token.type == TokenType::block_begin) {
        next();
        if (current().type == TokenType::name)
          for (const auto& end : end_names)
            if (current().value == end) return body;
        parse_statement(body);
        expect(TokenType::block_end, "'%}'");
      } else {
        error(token.line, "unexpected '{}'", describe(token));
      }
    }
    return body;
  }

  // The body of a block statement: skips an optional ':', expects '%}', parses until one of `end_names`.
  Body parse_statements(const std::vector<std::string>& end_names, bool drop_needle, const char* tag, int line) {
    skip_op(":");
    expect(TokenType::block_end, "'%}'");
    Body body = subparse(end_names);
    if (current().type == TokenType::eof) {
      std::string wanted;
      for (const auto& end : end_names) wanted += (wanted.empty() ? "'" : " or '") + end + "'";
      error(line, "unexpected end of template: the '{}' block needs {}", tag, wanted);
    }
    if (drop_needle) next();
    return body;
  }

  // Nesting of blocks and of parenthesized / operand expressions: bounded, as Python's recursion limit bounds
  // jinja2's parser, so that a hostile template cannot exhaust the stack.
  struct Nested {
    Parser& parser;
    explicit Nested(Parser& p) : parser(p) {
      if (++parser.depth_ > kMaxNesting)
        parser.error(parser.current().line, "the template nests blocks or expressions deeper than {}", kMaxNesting);
    }
    ~Nested() { --parser.depth_; }
    Nested(const Nested&) = delete;
    Nested& operator=(const Nested&) = delete;
  };
  static constexpr int kMaxNesting = 256;

  void parse_statement(Body& body) {
    const Nested nested(*this);
    const Token& token = current();
    if (token.type != TokenType::name) error(token.line, "tag name expected");
    const std::string tag = token.value;
    const int line = token.line;
    auto stmt = std::make_unique<Stmt>();
    stmt->line = line;
    if (tag == "for") {
      parse_for(*stmt);
    } else if (tag == "if") {
      parse_if(*stmt);
    } else if (tag == "set") {
      parse_set(*stmt);
    } else if (tag == "macro") {
      parse_macro(*stmt);
    } else if (tag == "call") {
      parse_call_block(*stmt);
    } else if (tag == "filter") {
      next();
      stmt->kind = StmtKind::filter_block;
      stmt->expr = parse_filter(nullptr, true);
      stmt->body = parse_statements({"endfilter"}, true, "filter", line);
    } else if (tag == "with") {
      parse_with(*stmt);
    } else if (tag == "print") {
      next();
      bool first = true;
      while (current().type != TokenType::block_end) {
        if (!first) expect_op(",");
        first = false;
        auto out = std::make_unique<Stmt>();
        out->kind = StmtKind::output;
        out->line = line;
        out->expr = parse_expression(true);
        body.push_back(std::move(out));
      }
      return;
    } else if (tag == "generation") {
      next();
      stmt->kind = StmtKind::generation;
      stmt->body = parse_statements({"endgeneration"}, true, "generation", line);
    } else if (tag == "break" || tag == "continue") {
      next();
      stmt->kind = tag == "break" ? StmtKind::break_ : StmtKind::continue_;
    } else if (tag == "block" || tag == "extends" || tag == "include" || tag == "from" || tag == "import" ||
               tag == "autoescape") {
      unsupported(line, "{{% {} %}}", tag);
    } else {
      error(line, "encountered unknown tag '{}'", tag);
    }
    body.push_back(std::move(stmt));
  }

  void parse_for(Stmt& stmt) {
    next();
    stmt.kind = StmtKind::for_;
    stmt.target = parse_target(true, false, "in");
    expect_name("in");
    stmt.expr = parse_tuple(false, false, "recursive");
    if (skip_name("if")) stmt.condition = parse_expression(true);
    if (is_name(current(), "recursive")) unsupported(current().line, "a recursive for loop");
    stmt.body = parse_statements({"endfor", "else"}, false, "for", stmt.line);
    if (next().value == "else") stmt.else_body = parse_statements({"endfor"}, true, "for", stmt.line);
  }

  void parse_if(Stmt& stmt) {
    next();
    stmt.kind = StmtKind::if_;
    while (true) {
      ExprPtr condition = parse_tuple(false, false, {});
      Body body = parse_statements({"elif", "else", "endif"}, false, "if", stmt.line);
      stmt.branches.emplace_back(std::move(condition), std::move(body));
      const Token& token = next();
      if (token.value == "elif") continue;
      if (token.value == "else") stmt.else_body = parse_statements({"endif"}, true, "if", stmt.line);
      break;
    }
  }

  void parse_set(Stmt& stmt) {
    next();
    stmt.target = parse_target(true, true, {});
    if (skip_op("=")) {
      stmt.kind = StmtKind::set;
      stmt.expr = parse_tuple(true, false, {});
      return;
    }
    stmt.kind = StmtKind::set_block;
    if (is_op(current(), "|")) stmt.expr = parse_filter(nullptr, false);
    stmt.body = parse_statements({"endset"}, true, "set", stmt.line);
  }

  void parse_signature(Stmt& stmt) {
    expect_op("(");
    while (!is_op(current(), ")")) {
      if (!stmt.params.empty()) expect_op(",");
      const Token& param = expect(TokenType::name, "a parameter name");
      stmt.params.push_back(param.value);
      if (skip_op("=")) stmt.defaults.push_back(parse_expression(true));
      else if (!stmt.defaults.empty()) error(param.line, "non-default argument follows default argument");
    }
    expect_op(")");
  }

  void parse_macro(Stmt& stmt) {
    next();
    stmt.kind = StmtKind::macro;
    stmt.text = expect(TokenType::name, "a macro name").value;
    parse_signature(stmt);
    stmt.body = parse_statements({"endmacro"}, true, "macro", stmt.line);
    note_names_used(stmt);
  }

  void parse_call_block(Stmt& stmt) {
    next();
    stmt.kind = StmtKind::call_block;
    if (is_op(current(), "(")) parse_signature(stmt);
    stmt.expr = parse_expression(true);
    if (stmt.expr->kind != ExprKind::call) error(stmt.line, "expected call");
    stmt.body = parse_statements({"endcall"}, true, "call", stmt.line);
    note_names_used(stmt);
  }

  void parse_with(Stmt& stmt) {
    next();
    stmt.kind = StmtKind::with;
    while (current().type != TokenType::block_end) {
      if (!stmt.bindings.empty()) expect_op(",");
      Target target = parse_target(true, false, {});
      expect_op("=");
      stmt.bindings.emplace_back(std::move(target), parse_expression(true));
    }
    stmt.body = parse_statements({"endwith"}, true, "with", stmt.line);
  }

  // An assignment target: a name, names separated by commas (with_tuple), or ns.attr (with_namespace).
  Target parse_target(bool with_tuple, bool with_namespace, const std::string& end_name) {
    Target target;
    const int line = current().line;
    while (true) {
      if (!target.names.empty()) expect_op(",");
      if (current().type == TokenType::block_end || (!end_name.empty() && is_name(current(), end_name.c_str()))) break;
      const Token& token = expect(TokenType::name, "a name to assign to");
      if (token.value == "true" || token.value == "false" || token.value == "none" || token.value == "True" ||
          token.value == "False" || token.value == "None")
        error(line, "can't assign to const");
      if (with_namespace && is_op(current(), ".")) {
        next();
        target.attribute = expect(TokenType::name, "an attribute name").value;
        if (!target.names.empty()) unsupported(line, "a namespace attribute inside a tuple of targets");
      }
      target.names.push_back(token.value);
      if (!with_tuple || !is_op(current(), ",")) break;
      target.unpack = true;
    }
    if (target.names.empty()) error(line, "expected an assignment target");
    if (target.unpack && !target.attribute.empty()) unsupported(line, "a namespace attribute inside a tuple of targets");
    return target;
  }

  // ---- expressions (jinja2/parser.py, parse_expression and below) ----

  ExprPtr make(ExprKind kind, int line) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    return expr;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    int line = current().line;
    ExprPtr expr = parse_or();
    while (skip_name("if")) {
      auto cond = make(ExprKind::conditional, line);
      ExprPtr test = parse_or();
      ExprPtr otherwise = skip_name("else") ? parse_condexpr() : nullptr;
      cond->args.push_back(std::move(expr));
      cond->args.push_back(std::move(test));
      cond->args.push_back(std::move(otherwise));
      expr = std::move(cond);
      line = current().line;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name(current(), "or")) {
      auto node = make(ExprKind::logical_or, next().line);
      node->args.push_back(std::move(left));
      node->args.push_back(parse_and());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name(current(), "and")) {
      auto node = make(ExprKind::logical_and, next().line);
      node->args.push_back(std::move(left));
      node->args.push_back(parse_not());
      left = std::move(node);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name(current(), "not")) {
      auto node = make(ExprKind::logical_not, next().line);
      node->subject = parse_not();
      return node;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = current().line;
    ExprPtr first = parse_math1();
    std::vector<CompareOp> ops;
    std::vector<ExprPtr> operands;
    while (true) {
      const Token& token = current();
      std::optional<CompareOp> op;
      if (token.type == TokenType::op) {
        if (token.value == "==") op = CompareOp::eq;
        else if (token.value == "!=") op = CompareOp::ne;
        else if (token.value == "<") op = CompareOp::lt;
        else if (token.value == "<=") op = CompareOp::le;
        else if (token.value == ">") op = CompareOp::gt;
        else if (token.value == ">=") op = CompareOp::ge;
        if (op) next();
      } else if (is_name(token, "in")) {
        next();
        op = CompareOp::in;
      } else if (is_name(token, "not") && is_name(look(), "in")) {
        next();
        next();
        op = CompareOp::not_in;
      }
      if (!op) break;
      ops.push_back(*op);
      operands.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto node = make(ExprKind::compare, line);
    node->args.push_back(std::move(first));
    for (auto& operand : operands) node->args.push_back(std::move(operand));
    node->compare_ops = std::move(ops);
    return node;
  }

  ExprPtr binary_node(BinaryOp op, ExprPtr left, ExprPtr right, int line) {
    auto node = make(ExprKind::binary, line);
    node->binary = op;
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    return node;
  }

  ExprPtr parse_math1() {
    int line = current().line;
    ExprPtr left = parse_concat();
    while (is_op(current(), "+") || is_op(current(), "-")) {
      const BinaryOp op = next().value == "+" ? BinaryOp::add : BinaryOp::sub;
      left = binary_node(op, std::move(left), parse_concat(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    const int line = current().line;
    ExprPtr first = parse_math2();
    if (!is_op(current(), "~")) return first;
    auto node = make(ExprKind::concat, line);
    node->args.push_back(std::move(first));
    while (skip_op("~")) node->args.push_back(parse_math2());
    return node;
  }

  ExprPtr parse_math2() {
    int line = current().line;
    ExprPtr left = parse_pow();
    while (true) {
      BinaryOp op;
      if (is_op(current(), "*")) op = BinaryOp::mul;
      else if (is_op(current(), "/")) op = BinaryOp::div;
      else if (is_op(current(), "//")) op = BinaryOp::floordiv;
      else if (is_op(current(), "%")) op = BinaryOp::mod;
      else break;
      next();
      left = binary_node(op, std::move(left), parse_pow(), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = current().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      left = binary_node(BinaryOp::pow, std::move(left), parse_unary(true), line);
      line = current().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    const Nested nested(*this);
    const Token& token = current();
    ExprPtr node;
    if (is_op(token, "-") || is_op(token, "+")) {
      node = make(token.value == "-" ? ExprKind::negate : ExprKind::plus, token.line);
      next();
      node->subject = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr constant(Json value, int line) {
    auto node = make(ExprKind::constant, line);
    node->value = Value(std::move(value));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = current();
    const int line = token.line;
    switch (token.type) {
      case TokenType::name: {
        next();
        if (token.value == "true" || token.value == "True") return constant(true, line);
        if (token.value == "false" || token.value == "False") return constant(false, line);
        if (token.value == "none" || token.value == "None") return constant(nullptr, line);
        auto node = make(ExprKind::name, line);
        node->name = token.value;
        return node;
      }
      case TokenType::string: {
        std::string text;
        while (current().type == TokenType::string) text += next().value;
        return constant(std::move(text), line);
      }
      case TokenType::integer: {
        next();
        errno = 0;
        const long long value = std::strtoll(token.value.c_str(), nullptr, 10);
        if (errno == ERANGE) unsupported(line, "the integer literal {} (larger than 64 bits)", token.value);
        return constant(static_cast<int64_t>(value), line);
      }
      case TokenType::floating:
        next();
        return constant(std::strtod(token.value.c_str(), nullptr), line);
      case TokenType::op:
        if (token.value == "(") {
          next();
          ExprPtr node = parse_tuple(true, true, {});
          expect_op(")");
          return node;
        }
        if (token.value == "[") return parse_list();
        if (token.value == "{") return parse_dict();
        break;
      default:
        break;
    }
    error(line, "unexpected '{}'", describe(token));
  }

  bool is_tuple_end(const std::string& end_name) const {
    const Token& token = current();
    if (token.type == TokenType::variable_end || token.type == TokenType::block_end || is_op(token, ")")) return true;
    return !end_name.empty() && is_name(token, end_name.c_str());
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parentheses, const std::string& end_name) {
    const int line = current().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(end_name)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(current(), ",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parentheses) error(line, "expected an expression, got '{}'", describe(current()));
    }
    auto node = make(ExprKind::tuple, line);
    node->args = std::move(items);
    return node;
  }

  ExprPtr parse_list() {
    auto node = make(ExprKind::list, next().line);
    while (!is_op(current(), "]")) {
      if (!node->args.empty()) expect_op(",");
      if (is_op(current(), "]")) break;
      node->args.push_back(parse_expression(true));
    }
    expect_op("]");
    return node;
  }

  ExprPtr parse_dict() {
    auto node = make(ExprKind::dict, next().line);
    while (!is_op(current(), "}")) {
      if (!node->args.empty()) expect_op(",");
      if (is_op(current(), "}")) break;
      node->args.push_back(parse_expression(true));
      expect_op(":");
      node->args.push_back(parse_expression(true));
    }
    expect_op("}");
    return node;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(current(), ".") || is_op(current(), "[")) node = parse_subscript(std::move(node));
      else if (is_op(current(), "(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(current(), "|")) node = parse_filter(std::move(node), false);
      else if (is_name(current(), "is")) node = parse_test(std::move(node));
      else if (is_op(current(), "(")) node = parse_call(std::move(node));
      else break;
    }
    return node;
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& token = next();
    if (token.value == ".") {
      const Token& attribute = next();
      if (attribute.type == TokenType::name) {
        auto get = make(ExprKind::getattr, token.line);
        get->subject = std::move(node);
        get->name = attribute.value;
        return get;
      }
      if (attribute.type != TokenType::integer) error(attribute.line, "expected name or number");
      auto get = make(ExprKind::getitem, token.line);
      get->subject = std::move(node);
      get->args.push_back(constant(static_cast<int64_t>(std::strtoll(attribute.value.c_str(), nullptr, 10)), token.line));
      return get;
    }
    std::vector<ExprPtr> args;
    while (!is_op(current(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.size() != 1) unsupported(token.line, "a subscript with several indices");
    if (args[0]->kind == ExprKind::slice && args[0]->subject == nullptr && args[0]->name == "slice") {
      args[0]->subject = std::move(node);
      args[0]->name.clear();
      return std::move(args[0]);
    }
    auto get = make(ExprKind::getitem, token.line);
    get->subject = std::move(node);
    get->args.push_back(std::move(args[0]));
    return get;
  }

  // An index, or a slice (a node of kind slice, named "slice" until its subject is set).
  ExprPtr parse_subscribed() {
    const int line = current().line;
    std::vector<ExprPtr> bounds;
    if (is_op(current(), ":")) {
      next();
      bounds.push_back(nullptr);
    } else {
      ExprPtr index = parse_expression(true);
      if (!is_op(current(), ":")) return index;
      next();
      bounds.push_back(std::move(index));
    }
    if (is_op(current(), ":")) bounds.push_back(nullptr);
    else if (!is_op(current(), "]") && !is_op(current(), ",")) bounds.push_back(parse_expression(true));
    else bounds.push_back(nullptr);
    if (is_op(current(), ":")) {
      next();
      if (!is_op(current(), "]") && !is_op(current(), ",")) bounds.push_back(parse_expression(true));
      else bounds.push_back(nullptr);
    } else {
      bounds.push_back(nullptr);
    }
    auto slice = make(ExprKind::slice, line);
    slice->name = "slice";
    slice->args = std::move(bounds);
    return slice;
  }

  void parse_call_args(Expr& node) {
    const int line = current().line;
    expect_op("(");
    bool require_comma = false;
    while (!is_op(current(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(current(), ")")) break;
      }
      if (is_op(current(), "*") || is_op(current(), "**")) unsupported(line, "*args or **kwargs in a call");
      if (current().type == TokenType::name && is_op(look(), "=")) {
        const std::string key = next().value;
        next();
        node.keywords.emplace_back(key, parse_expression(true));
      } else {
        if (!node.keywords.empty()) error(line, "invalid syntax for function call expression");
        node.args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto call = make(ExprKind::call, current().line);
    call->subject = std::move(node);
    parse_call_args(*call);
    return call;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(current(), "|") || start_inline) {
      if (!start_inline) next();
      start_inline = false;
      const Token& token = expect(TokenType::name, "a filter name");
      auto filter = make(ExprKind::filter, token.line);
      filter->name = token.value;
      if (is_op(current(), ".")) unsupported(token.line, "a dotted filter name");
      filter->subject = std::move(node);
      if (is_op(current(), "(")) parse_call_args(*filter);
      node = std::move(filter);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = next().line;
    const bool negated = skip_name("not");
    auto test = make(ExprKind::test, line);
    test->name = expect(TokenType::name, "a test name").value;
    if (is_op(current(), ".")) unsupported(line, "a dotted test name");
    test->subject = std::move(node);
    const Token& token = current();
    if (is_op(token, "(")) {
      parse_call_args(*test);
    } else if ((token.type == TokenType::name || token.type == TokenType::string || token.type == TokenType::integer ||
                token.type == TokenType::floating || is_op(token, "[") || is_op(token, "{")) &&
               !is_name(token, "else") && !is_name(token, "or") && !is_name(token, "and")) {
      if (is_name(token, "is")) error(line, "you cannot chain multiple tests with is");
      test->args.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return test;
    auto negation = make(ExprKind::logical_not, line);
    negation->subject = std::move(test);
    return negation;
  }

  // ---- names a macro's body reads (Jinja gives a macro `caller`, `varargs`, `kwargs` only when it reads them) ----

  static void note_names_used(Stmt& stmt) {
    std::set<std::string> names;
    visit_expressions(stmt.body, [&](const Expr& expr) {
      if (expr.kind == ExprKind::name) names.insert(expr.name);
    });
    const auto used = [&](const char* name) {
      return names.count(name) > 0 && std::find(stmt.params.begin(), stmt.params.end(), name) == stmt.params.end();
    };
    stmt.uses_caller = used("caller");
    stmt.uses_varargs = used("varargs");
    stmt.uses_kwargs = used("kwargs");
  }

  const std::vector<Token>& tokens_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

void visit_expression(const Expr* expr, const std::function<void(const Expr&)>& visit) {
  if (expr == nullptr) return;
  visit(*expr);
  visit_expression(expr->subject.get(), visit);
  for (const auto& arg : expr->args) visit_expression(arg.get(), visit);
  for (const auto& [key, value] : expr->keywords) visit_expression(value.get(), visit);
}

bool contains_generation(const Body& body) {
  for (const auto& stmt : body) {
    if (stmt->kind == StmtKind::generation) return true;
    for (const auto& [condition, branch] : stmt->branches)
      if (contains_generation(branch)) return true;
    if (contains_generation(stmt->body) || contains_generation(stmt->else_body)) return true;
  }
  return false;
}

}  // namespace

Body parse(const std::vector<Token>& tokens, const std::string& name) { return Parser(tokens, name).parse_template(); }

bool has_generation(const Body& body) { return contains_generation(body); }

void visit_expressions(const Body& body, const std::function<void(const Expr&)>& visit) {
  for (const auto& stmt : body) {
    visit_expression(stmt->expr.get(), visit);
    visit_expression(stmt->condition.get(), visit);
    for (const auto& [condition, branch] : stmt->branches) {
      visit_expression(condition.get(), visit);
      visit_expressions(branch, visit);
    }
    visit_expressions(stmt->body, visit);
    visit_expressions(stmt->else_body, visit);
    for (const auto& value : stmt->defaults) visit_expression(value.get(), visit);
    for (const auto& [target, value] : stmt->bindings) visit_expression(value.get(), visit);
  }
}

}  // namespace hpctrain::chat
