// Statements of a chat template, scopes, output and limits (renderer.hpp, Note [Jinja scopes]).
#include "chat/renderer.hpp"

#include "chat/objects.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

// Restores the renderer's scope (and output) when a block ends, also by an exception.
template <typename T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(std::exchange(slot, std::move(value))) {}
  ~Restore() { slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

std::size_t data_bytes(const Json& data) {
  switch (data.type()) {
    case Json::value_t::string: return 16 + data.get_ref<const std::string&>().size();
    case Json::value_t::array: {
      std::size_t total = 16;
      for (const auto& item : data) total += data_bytes(item);
      return total;
    }
    case Json::value_t::object: {
      std::size_t total = 16;
      for (const auto& [key, item] : data.items()) total += 16 + key.size() + data_bytes(item);
      return total;
    }
    default: return 16;
  }
}

}  // namespace

const Value* Scope::find(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get())
    for (auto it = scope->vars_.rbegin(); it != scope->vars_.rend(); ++it)
      if (it->first == name) return &it->second;
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [key, bound] : vars_)
    if (key == name) {
      bound = std::move(value);
      return;
    }
  vars_.emplace_back(name, std::move(value));
}

Renderer::Renderer(const std::string& name, const RenderOptions& options, std::shared_ptr<Scope> globals)
    : name_(name), options_(options), scope_(std::make_shared<Scope>(std::move(globals))) {}

Rendered Renderer::run(const Body& body) {
  if (exec(body) != Flow::normal) error(0, "break or continue outside a loop");
  return Rendered{std::move(output_), std::move(spans_)};
}

void Renderer::throw_error(int line, const std::string& message, bool template_error) const {
  const std::string text = line > 0 ? fmt::format("{} line {}: {}", name_, line, message) : fmt::format("{}: {}", name_, message);
  if (template_error) throw TemplateError(text);
  throw Error(text);
}

void Renderer::raised(int line, const std::string& message) const {
  throw_error(line, "the template raised an exception: " + message, true);
}

void Renderer::undefined_error(int line, const Value& undefined) const {
  if (undefined.undefined_is_security()) error(line, "{}", undefined.undefined_message());
  error(line, "{}", undefined.undefined_message());
}

void Renderer::step(int line, std::size_t bytes) {
  steps_ += 1 + static_cast<int64_t>(bytes >> 10);
  if (steps_ > options_.limits.max_steps)
    throw_error(line,
                fmt::format("the template ran more than {} steps (RenderLimits::max_steps): it loops without end, or "
                            "its input is far larger than a chat", options_.limits.max_steps),
                false);
}

void Renderer::check_size(int line, std::size_t bytes) const {
  if (bytes > options_.limits.max_bytes)
    throw_error(line,
                fmt::format("the template builds a text of more than {} bytes (RenderLimits::max_bytes)",
                            options_.limits.max_bytes),
                false);
}

void Renderer::check_data(int line, const Json& data) const { check_size(line, data_bytes(data)); }

void Renderer::enter_call(int line) {
  if (++depth_ > options_.limits.max_call_depth) {
    --depth_;
    throw_error(line,
                fmt::format("macro calls nested deeper than {} (RenderLimits::max_call_depth): endless recursion?",
                            options_.limits.max_call_depth),
                false);
  }
}

void Renderer::write(int line, std::string_view text) {
  out_->append(text);
  check_size(line, out_->size());
}

std::string Renderer::capture(const Body& body, std::shared_ptr<Scope> scope) {
  std::string buffer;
  const Restore<std::string*> output(out_, &buffer);
  const Restore<std::shared_ptr<Scope>> inner(scope_, std::move(scope));
  const Restore<int> loops(loop_depth_, 0);
  if (exec(body) != Flow::normal) error(body.empty() ? 0 : body.front()->line, "break or continue outside a loop");
  return buffer;
}

Value Renderer::eval_in(const Expr& expr, std::shared_ptr<Scope> scope) {
  const Restore<std::shared_ptr<Scope>> inner(scope_, std::move(scope));
  return eval(expr);
}

Value Renderer::filter_chain(const Expr& chain, const Value& innermost) {
  const Value subject = chain.subject ? filter_chain(*chain.subject, innermost) : innermost;
  CallArgs args;
  for (const auto& arg : chain.args) args.positional.push_back(eval(*arg));
  for (const auto& [key, value] : chain.keywords) args.keyword.emplace_back(key, eval(*value));
  return apply_filter(*this, chain.name, subject, args, chain.line);
}

void Renderer::assign(const Target& target, const Value& value, int line) {
  if (!target.attribute.empty()) {
    const Value* holder = scope_->find(target.names[0]);
    auto* ns = holder != nullptr ? dynamic_cast<NamespaceObject*>(holder->object()) : nullptr;
    if (ns == nullptr) error(line, "cannot assign attribute on non-namespace object");
    ns->set(target.attribute, value);
    return;
  }
  if (!target.unpack) {
    scope_->set(target.names[0], value);
    return;
  }
  const std::vector<Value> items = iterate(value, line);
  if (items.size() != target.names.size())
    error(line, "{} values to unpack (expected {}, got {})", items.size() < target.names.size() ? "not enough" : "too many",
          target.names.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) scope_->set(target.names[i], items[i]);
}

Flow Renderer::exec(const Body& body) {
  for (const auto& statement : body) {
    const Stmt& stmt = *statement;
    step(stmt.line);
    switch (stmt.kind) {
      case StmtKind::text:
        write(stmt.line, stmt.text);
        break;
      case StmtKind::output: {
        const Value value = eval(*stmt.expr);
        if (value.is_string()) {
          write(stmt.line, value.string());
        } else {
          std::string text;
          try {
            append_str(text, value);
          } catch (const TemplateError&) {
            throw;
          } catch (const Error& failure) {
            unsupported(stmt.line, "{}", failure.what());
          }
          write(stmt.line, text);
        }
        break;
      }
      case StmtKind::if_: {
        const Body* chosen = &stmt.else_body;
        for (const auto& [condition, branch] : stmt.branches)
          if (truthy(eval(*condition))) {
            chosen = &branch;
            break;
          }
        if (const Flow flow = exec(*chosen); flow != Flow::normal) return flow;
        break;
      }
      case StmtKind::for_:
        exec_for(stmt);
        break;
      case StmtKind::set:
        assign(stmt.target, eval(*stmt.expr), stmt.line);
        break;
      case StmtKind::set_block: {
        Value text(Json(capture(stmt.body, std::make_shared<Scope>(scope_))));
        assign(stmt.target, stmt.expr ? filter_chain(*stmt.expr, text) : text, stmt.line);
        break;
      }
      case StmtKind::macro:
        scope_->set(stmt.text, Value(std::make_shared<MacroObject>(stmt, stmt.text, scope_)));
        break;
      case StmtKind::call_block: {
        const Expr& call_expr = *stmt.expr;
        const Value callee = eval(*call_expr.subject);
        CallArgs args;
        for (const auto& arg : call_expr.args) args.positional.push_back(eval(*arg));
        for (const auto& [key, value] : call_expr.keywords) args.keyword.emplace_back(key, eval(*value));
        args.keyword.emplace_back("caller", Value(std::make_shared<MacroObject>(stmt, "caller", scope_)));
        const Value result = call(callee, args, stmt.line);
        write(stmt.line, str(result));
        break;
      }
      case StmtKind::filter_block: {
        const Value text(Json(capture(stmt.body, std::make_shared<Scope>(scope_))));
        write(stmt.line, str(filter_chain(*stmt.expr, text)));
        break;
      }
      case StmtKind::with: {
        auto inner = std::make_shared<Scope>(scope_);
        std::vector<Value> values;
        for (const auto& [target, value] : stmt.bindings) values.push_back(eval(*value));
        const Restore<std::shared_ptr<Scope>> scoped(scope_, inner);
        for (std::size_t i = 0; i < values.size(); ++i) assign(stmt.bindings[i].first, values[i], stmt.line);
        if (const Flow flow = exec(stmt.body); flow != Flow::normal) return flow;
        break;
      }
      case StmtKind::generation:
        exec_generation(stmt);
        break;
      case StmtKind::break_:
      case StmtKind::continue_:
        if (loop_depth_ == 0) error(stmt.line, "{} outside a loop", stmt.kind == StmtKind::break_ ? "break" : "continue");
        return stmt.kind == StmtKind::break_ ? Flow::break_ : Flow::continue_;
    }
  }
  return Flow::normal;
}

void Renderer::exec_for(const Stmt& stmt) {
  std::vector<Value> items = iterate(eval(*stmt.expr), stmt.line);
  if (stmt.condition) {
    std::vector<Value> kept;
    for (auto& item : items) {
      const Restore<std::shared_ptr<Scope>> scoped(scope_, std::make_shared<Scope>(scope_));
      assign(stmt.target, item, stmt.line);
      if (truthy(eval(*stmt.condition))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    const Restore<std::shared_ptr<Scope>> scoped(scope_, std::make_shared<Scope>(scope_));
    if (exec(stmt.else_body) != Flow::normal) error(stmt.line, "break or continue outside a loop");
    return;
  }
  auto loop = std::make_shared<LoopObject>(std::move(items), 1);
  const Value loop_value(loop);
  const Restore<int> loops(loop_depth_, loop_depth_ + 1);
  for (std::size_t i = 0; i < loop->items().size(); ++i) {
    step(stmt.line);
    loop->set_index(i);
    const Restore<std::shared_ptr<Scope>> scoped(scope_, std::make_shared<Scope>(scope_));
    assign(stmt.target, loop->items()[i], stmt.line);
    scope_->set("loop", loop_value);
    if (exec(stmt.body) == Flow::break_) break;
  }
}

void Renderer::exec_generation(const Stmt& stmt) {
  // Note [Generation spans]: transformers measures a span from the length of the template's top-level output
  // when the block ends rendering (its body is rendered first, as a macro), whatever buffer the block is in.
  const std::string body = capture(stmt.body, std::make_shared<Scope>(scope_));
  const std::size_t begin = output_.size();
  spans_.push_back({begin, begin + body.size()});
  write(stmt.line, body);
}

}  // namespace hpctrain::chat
