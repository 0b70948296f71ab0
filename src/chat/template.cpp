// Template: parse once (lexer, parser, and the check jinja2's compiler makes: every filter and test exists), render
// many times (template.hpp).
#include "hpctrain/chat/template.hpp"

#include "chat/ast.hpp"
#include "chat/lexer.hpp"
#include "chat/renderer.hpp"

namespace hpctrain::chat {
namespace {

// jinja2 refuses an unknown filter or test when it compiles the template; so does this, and it also refuses the
// Jinja filters it does not implement.
void check_names(const Body& body, const std::string& name) {
  visit_expressions(body, [&](const Expr& expr) {
    if (expr.kind == ExprKind::filter) {
      switch (filter_support(expr.name)) {
        case Support::supported: break;
        case Support::unsupported:
          fail("{} line {}: unsupported construct: the filter '{}' (hpctrain's chat template engine refuses it "
               "rather than render a different text)", name, expr.line, expr.name);
        case Support::unknown: fail("{} line {}: No filter named '{}'.", name, expr.line, expr.name);
      }
    }
    if (expr.kind == ExprKind::test && test_support(expr.name) != Support::supported)
      fail("{} line {}: No test named '{}'.", name, expr.line, expr.name);
  });
}

}  // namespace

struct Template::Parsed {
  std::string name;
  Body body;
  bool generation = false;
};

Template::Template(std::string_view source, std::string name) : parsed_(std::make_unique<Parsed>()) {
  parsed_->name = std::move(name);
  parsed_->body = parse(lex(source, parsed_->name), parsed_->name);
  check_names(parsed_->body, parsed_->name);
  parsed_->generation = chat::has_generation(parsed_->body);
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

const std::string& Template::name() const { return parsed_->name; }
bool Template::has_generation() const { return parsed_->generation; }

Rendered Template::render(const Json& variables, const RenderOptions& options) const {
  if (!variables.is_object()) fail("{}: the template's variables must be a JSON object", parsed_->name);
  auto globals = std::make_shared<Scope>(builtins());
  // The variables outlive the rendering: values point into them without owning them.
  const std::shared_ptr<const Json> root(std::shared_ptr<const Json>(), &variables);
  for (const auto& [key, value] : variables.items()) globals->set(key, Value(root, value));
  Renderer renderer(parsed_->name, options, std::move(globals));
  return renderer.run(parsed_->body);
}

}  // namespace hpctrain::chat
