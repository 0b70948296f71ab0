// Expressions of a chat template (renderer.hpp): names, attribute and item access as jinja2's sandbox does it,
// calls, Python's operators on template values.
#include <algorithm>
#include <cmath>
#include <limits>

#include "chat/objects.hpp"
#include "hpctrain/chat/chat_inputs.hpp"
#include "chat/pystr.hpp"
#include "chat/renderer.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

bool is_integral(const Value& value) { return value.is_int() || value.is_bool(); }

const char* symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::sub: return "-";
    case BinaryOp::mul: return "*";
    case BinaryOp::div: return "/";
    case BinaryOp::floordiv: return "//";
    case BinaryOp::mod: return "%";
    case BinaryOp::pow: return "**";
  }
  return "?";
}

// Python's float floor division and modulo (Objects/floatobject.c, float_divmod).
std::pair<double, double> float_divmod(double vx, double wx) {
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv = 0.0;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

class Arithmetic {
 public:
  Arithmetic(Renderer& renderer, int line) : r_(renderer), line_(line) {}

  Value apply(BinaryOp op, const Value& a, const Value& b) {
    if (a.is_undefined()) r_.undefined_error(line_, a);
    if (b.is_undefined()) r_.undefined_error(line_, b);
    if (op == BinaryOp::add) {
      if (a.is_string() && b.is_string()) {
        // Markup + str escapes the str (and str + Markup: Markup.__radd__ goes first).
        if (a.is_markup() || b.is_markup()) {
          std::string joined = (a.is_markup() ? a.string() : py::html_escape(a.string())) +
                               (b.is_markup() ? b.string() : py::html_escape(b.string()));
          r_.check_size(line_, joined.size());
          return Value::markup(std::move(joined));
        }
        return text(a.string() + b.string());
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        Json items = a.data();
        for (const auto& item : b.data()) items.push_back(item);
        r_.check_data(line_, items);
        r_.step(line_, items.size() * 16);
        if (a.is_tuple()) return Value::tuple(std::move(items));
        return a.has_tuple_items() && b.has_tuple_items() ? Value::tuple_list(std::move(items)) : Value(std::move(items));
      }
    }
    if (op == BinaryOp::mul) {
      if ((a.is_string() || a.is_list()) && is_integral(b)) return repeat(a, as_int(b.data()));
      if (is_integral(a) && (b.is_string() || b.is_list())) return repeat(b, as_int(a.data()));
    }
    if (op == BinaryOp::mod && a.is_string()) {
      if (a.is_markup()) r_.unsupported(line_, "% formatting of a string marked safe");
      return percent_format(r_, a.string(), b, line_);
    }
    if (!a.is_number() || !b.is_number()) unsupported(op, a, b);
    if (is_integral(a) && is_integral(b) && op != BinaryOp::div) return integer(op, as_int(a.data()), as_int(b.data()));
    return floating(op, as_double(a.data()), as_double(b.data()));
  }

 private:
  [[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
    r_.error(line_, "unsupported operand type(s) for {}: '{}' and '{}'", symbol(op), type_name(a), type_name(b));
  }

  Value text(std::string s) {
    r_.check_size(line_, s.size());
    r_.step(line_, s.size());
    return Value(Json(std::move(s)));
  }

  Value repeat(const Value& sequence, int64_t times) {
    if (times <= 0) return Value(sequence.is_string() ? Json("") : Json::array());
    if (sequence.is_string()) {
      const auto& s = sequence.string();
      r_.check_size(line_, s.size() > 0 && static_cast<uint64_t>(times) > SIZE_MAX / s.size() ? SIZE_MAX : s.size() * static_cast<std::size_t>(times));
      std::string out;
      out.reserve(s.size() * static_cast<std::size_t>(times));
      for (int64_t i = 0; i < times; ++i) out += s;
      return text(std::move(out));
    }
    const Json& items = sequence.data();
    r_.check_size(line_, items.size() * static_cast<std::size_t>(std::min<int64_t>(times, int64_t{1} << 40)) * 16);
    Json out = Json::array();
    for (int64_t i = 0; i < times; ++i)
      for (const auto& item : items) out.push_back(item);
    r_.check_data(line_, out);
    return Value(std::move(out));
  }

  Value integer(BinaryOp op, int64_t x, int64_t y) {
    int64_t result = 0;
    bool overflow = false;
    switch (op) {
      case BinaryOp::add: overflow = __builtin_add_overflow(x, y, &result); break;
      case BinaryOp::sub: overflow = __builtin_sub_overflow(x, y, &result); break;
      case BinaryOp::mul: overflow = __builtin_mul_overflow(x, y, &result); break;
      case BinaryOp::floordiv:
      case BinaryOp::mod: {
        if (y == 0) r_.error(line_, "integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) overflow = true;
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          --q;
        }
        result = op == BinaryOp::floordiv ? q : m;
        break;
      }
      case BinaryOp::pow: {
        if (y < 0) return floating(op, static_cast<double>(x), static_cast<double>(y));
        result = 1;
        int64_t base = x;
        for (int64_t e = y; e > 0 && !overflow; e >>= 1) {
          if (e & 1) overflow = __builtin_mul_overflow(result, base, &result);
          if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
        }
        break;
      }
      case BinaryOp::div: break;
    }
    if (overflow) r_.unsupported(line_, "integer overflow in {} {} {} (hpctrain's template integers are 64-bit)", x, symbol(op), y);
    return Value(Json(result));
  }

  Value floating(BinaryOp op, double x, double y) {
    double result = 0.0;
    switch (op) {
      case BinaryOp::add: result = x + y; break;
      case BinaryOp::sub: result = x - y; break;
      case BinaryOp::mul: result = x * y; break;
      case BinaryOp::div:
        if (y == 0.0) r_.error(line_, "division by zero");
        result = x / y;
        break;
      case BinaryOp::floordiv:
      case BinaryOp::mod: {
        if (y == 0.0) r_.error(line_, "float floor division or modulo by zero");
        const auto [q, m] = float_divmod(x, y);
        result = op == BinaryOp::floordiv ? q : m;
        break;
      }
      case BinaryOp::pow:
        if (x == 0.0 && y < 0.0) r_.error(line_, "0.0 cannot be raised to a negative power");
        if (x < 0.0 && y != std::floor(y)) r_.unsupported(line_, "a negative number to a fractional power (a complex number)");
        result = std::pow(x, y);
        break;
    }
    return Value(Json(result));
  }

  Renderer& r_;
  int line_;
};

std::optional<int64_t> slice_bound(const Value& value, bool& invalid) {
  if (value.is_none()) return std::nullopt;
  if (value.is_int() || value.is_bool()) return as_int(value.data());
  invalid = true;
  return std::nullopt;
}

// Python's printf-style `format % values` for %s, %r, %d, %i, %f and %%.
Value percent_format_impl(Renderer& r, const std::string& format, const Value& values, int line) {
  std::vector<Value> args;
  if (values.is_tuple()) {
    for (const auto& item : values.data()) args.push_back(values.child(item));
  } else {
    args.push_back(values);
  }
  std::string out;
  std::size_t next_arg = 0;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    if (i + 1 >= format.size()) r.error(line, "incomplete format");
    const char conversion = format[++i];
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (conversion != 's' && conversion != 'r' && conversion != 'd' && conversion != 'i' && conversion != 'f')
      r.unsupported(line, "the format '%{}' in a % expression", conversion);
    if (next_arg >= args.size()) r.error(line, "not enough arguments for format string");
    const Value& arg = args[next_arg++];
    if (conversion == 's') {
      append_str(out, arg);
    } else if (conversion == 'r') {
      out += repr(arg);
    } else if (!arg.is_number()) {
      r.error(line, "%{} format: a real number is required, not {}", conversion, type_name(arg));
    } else if (conversion == 'f') {
      out += fmt::format("{:.6f}", as_double(arg.data()));
    } else {
      out += std::to_string(arg.is_float() ? static_cast<int64_t>(std::trunc(arg.data().get<double>())) : as_int(arg.data()));
    }
  }
  if (next_arg < args.size()) r.error(line, "not all arguments converted during string formatting");
  r.check_size(line, out.size());
  return Value(Json(std::move(out)));
}


}  // namespace

Value percent_format(Renderer& renderer, const std::string& format, const Value& values, int line) {
  return percent_format_impl(renderer, format, values, line);
}

bool contains(Renderer& r, const Value& container, const Value& item, int line) {
  if (container.is_undefined()) return false;  // iter(Undefined) is empty
  if (container.is_string()) {
    if (!item.is_string()) r.error(line, "'in <string>' requires string as left operand, not {}", type_name(item));
    return container.string().find(item.string()) != std::string::npos;
  }
  if (container.is_dict()) {
    if (!item.is_data() || item.is_list() || item.is_dict()) {
      if (item.is_undefined()) return false;
      r.error(line, "unhashable type: '{}'", type_name(item));
    }
    return item.is_string() && container.data().contains(item.string());
  }
  if (container.is_list()) {
    for (const auto& element : container.data())
      if (item.is_data() && equal_json(element, item.data())) return true;
    return false;
  }
  if (auto* generator = dynamic_cast<GeneratorObject*>(container.object())) {
    for (const auto& element : generator->take())
      if (equal(element, item)) return true;
    return false;
  }
  r.error(line, "argument of type '{}' is not iterable", type_name(container));
}

Value Renderer::eval(const Expr& e) {
  switch (e.kind) {
    case ExprKind::constant:
      return e.value;
    case ExprKind::name: {
      if (const Value* found = scope_->find(e.name)) return *found;
      return Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case ExprKind::getattr:
      return getattr(eval(*e.subject), e.name, e.line);
    case ExprKind::getitem:
      return getitem(eval(*e.subject), eval(*e.args[0]), e.line);
    case ExprKind::slice: {
      const Value subject = eval(*e.subject);
      if (subject.is_undefined()) undefined_error(e.line, subject);
      bool invalid = false;
      std::optional<int64_t> bounds[3];
      for (int i = 0; i < 3; ++i)
        if (e.args[i]) bounds[i] = slice_bound(eval(*e.args[i]), invalid);
      if (bounds[2] && *bounds[2] == 0) error(e.line, "slice step cannot be zero");
      if (invalid || !(subject.is_string() || subject.is_list()))
        return Value::undefined(fmt::format("'{}' object has no element of that slice", type_name(subject)));
      if (subject.is_string()) {
        const auto b = py::slice_indices(bounds[0], bounds[1], bounds[2], py::length(subject.string()));
        return Value(Json(py::slice(subject.string(), b)));
      }
      const Json& items = subject.data();
      const auto b = py::slice_indices(bounds[0], bounds[1], bounds[2], static_cast<int64_t>(items.size()));
      Json out = Json::array();
      for (const int64_t i : py::slice_positions(b)) out.push_back(items[static_cast<std::size_t>(i)]);
      step(e.line, out.size() * 16);
      if (subject.is_tuple()) return Value::tuple(std::move(out));
      return subject.has_tuple_items() ? Value::tuple_list(std::move(out)) : Value(std::move(out));
    }
    case ExprKind::call: {
      const Value callee = eval(*e.subject);
      CallArgs args;
      for (const auto& arg : e.args) args.positional.push_back(eval(*arg));
      for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value));
      return call(callee, args, e.line);
    }
    case ExprKind::filter: {
      const Value subject = eval(*e.subject);
      CallArgs args;
      for (const auto& arg : e.args) args.positional.push_back(eval(*arg));
      for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value));
      step(e.line);
      return apply_filter(*this, e.name, subject, args, e.line);
    }
    case ExprKind::test: {
      const Value subject = eval(*e.subject);
      CallArgs args;
      for (const auto& arg : e.args) args.positional.push_back(eval(*arg));
      for (const auto& [key, value] : e.keywords) args.keyword.emplace_back(key, eval(*value));
      return Value(Json(apply_test(*this, e.name, subject, args, e.line)));
    }
    case ExprKind::logical_not:
      return Value(Json(!truthy(eval(*e.subject))));
    case ExprKind::negate:
    case ExprKind::plus: {
      const Value operand = eval(*e.subject);
      if (operand.is_undefined()) undefined_error(e.line, operand);
      if (!operand.is_number()) error(e.line, "bad operand type for unary {}: '{}'", e.kind == ExprKind::negate ? '-' : '+', type_name(operand));
      if (operand.is_float()) return Value(Json(e.kind == ExprKind::negate ? -operand.data().get<double>() : operand.data().get<double>()));
      const int64_t v = as_int(operand.data());
      if (e.kind == ExprKind::negate && v == std::numeric_limits<int64_t>::min()) error(e.line, "integer overflow");
      return Value(Json(e.kind == ExprKind::negate ? -v : v));
    }
    case ExprKind::binary: {
      if (e.binary != BinaryOp::add) return Arithmetic(*this, e.line).apply(e.binary, eval(*e.args[0]), eval(*e.args[1]));
      // A chain a + b + c + ...: templates build their text this way; strings are joined once.
      std::vector<const Expr*> leaves;
      const Expr* node = &e;
      for (; node->kind == ExprKind::binary && node->binary == BinaryOp::add; node = node->args[0].get())
        leaves.push_back(node->args[1].get());
      leaves.push_back(node);
      std::vector<Value> values;
      values.reserve(leaves.size());
      std::size_t bytes = 0;
      bool strings = true;
      for (auto it = leaves.rbegin(); it != leaves.rend(); ++it) {
        values.push_back(eval(**it));
        strings = strings && values.back().is_string() && !values.back().is_markup();
        if (strings) bytes += values.back().string().size();
      }
      if (strings) {
        std::string joined;
        joined.reserve(bytes);
        for (const Value& value : values) joined += value.string();
        check_size(e.line, joined.size());
        step(e.line, joined.size());
        return Value(Json(std::move(joined)));
      }
      Arithmetic arithmetic(*this, e.line);
      Value total = values[0];
      for (std::size_t i = 1; i < values.size(); ++i) total = arithmetic.apply(BinaryOp::add, total, values[i]);
      return total;
    }
    case ExprKind::compare: {
      Value left = eval(*e.args[0]);
      for (std::size_t i = 0; i < e.compare_ops.size(); ++i) {
        Value right = eval(*e.args[i + 1]);
        bool holds = false;
        switch (e.compare_ops[i]) {
          case CompareOp::eq: holds = equal(left, right); break;
          case CompareOp::ne: holds = !equal(left, right); break;
          case CompareOp::in: holds = contains(*this, right, left, e.line); break;
          case CompareOp::not_in: holds = !contains(*this, right, left, e.line); break;
          default: {
            if (left.is_undefined()) undefined_error(e.line, left);
            if (right.is_undefined()) undefined_error(e.line, right);
            int order = 0;
            try {
              order = compare(left, right);
            } catch (const Error& failure) {
              error(e.line, "{}", failure.what());
            }
            const CompareOp op = e.compare_ops[i];
            holds = op == CompareOp::lt ? order < 0 : op == CompareOp::le ? order <= 0 : op == CompareOp::gt ? order > 0 : order >= 0;
          }
        }
        if (!holds) return Value(Json(false));
        left = std::move(right);
      }
      return Value(Json(true));
    }
    case ExprKind::logical_and: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? eval(*e.args[1]) : left;
    }
    case ExprKind::logical_or: {
      Value left = eval(*e.args[0]);
      return truthy(left) ? left : eval(*e.args[1]);
    }
    case ExprKind::conditional: {
      if (truthy(eval(*e.args[1]))) return eval(*e.args[0]);
      if (e.args[2]) return eval(*e.args[2]);
      return Value::undefined(fmt::format("the inline if-expression on line {} evaluated to false and no else section was defined", e.line));
    }
    case ExprKind::list:
    case ExprKind::tuple: {
      std::vector<Value> items;
      for (const auto& item : e.args) items.push_back(eval(*item));
      Value list = make_list(std::move(items), e.line);
      return e.kind == ExprKind::tuple ? Value::tuple(list.data()) : list;
    }
    case ExprKind::dict: {
      Json out = Json::object();
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        const Value key = eval(*e.args[i]);
        if (!key.is_string()) unsupported(e.line, "a dict key of type '{}' (JSON keys are strings)", type_name(key));
        out[key.string()] = to_json(eval(*e.args[i + 1]), e.line);
      }
      check_data(e.line, out);
      return Value(std::move(out));
    }
    case ExprKind::concat: {
      std::string out;
      for (const auto& part : e.args) append_str(out, eval(*part));
      check_size(e.line, out.size());
      step(e.line, out.size());
      return Value(Json(std::move(out)));
    }
  }
  error(e.line, "internal error: an expression of unknown kind");
}

Value Renderer::getattr(const Value& subject, const std::string& name, int line) {
  if (subject.is_undefined()) undefined_error(line, subject);
  if (subject.is_object()) return subject.object()->attribute(name);
  if (name.rfind("__", 0) == 0)
    return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(subject)), true);
  switch (method_kind(subject, name)) {
    case MethodKind::safe: return Value(std::make_shared<BoundMethodObject>(subject, name));
    case MethodKind::unsafe:
      return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(subject)), true);
    case MethodKind::none: break;
  }
  if (subject.is_dict()) {
    const auto found = subject.data().find(name);
    if (found != subject.data().end()) return subject.child(*found);
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", subject.is_dict() ? "dict object" : type_name(subject), name));
}

Value Renderer::getitem(const Value& subject, const Value& key, int line) {
  if (subject.is_undefined()) undefined_error(line, subject);
  if (subject.is_data()) {
    const Json& data = subject.data();
    if (data.is_object() && key.is_string()) {
      const auto found = data.find(key.string());
      if (found != data.end()) return subject.child(*found);
    } else if ((data.is_array() || data.is_string()) && (key.is_int() || key.is_bool())) {
      int64_t index = as_int(key.data());
      if (data.is_string()) {
        if (auto c = py::at(data.get_ref<const std::string&>(), index)) return Value(Json(std::move(*c)));
      } else {
        if (index < 0) index += static_cast<int64_t>(data.size());
        if (index >= 0 && index < static_cast<int64_t>(data.size())) return subject.child(data[static_cast<std::size_t>(index)]);
      }
      return Value::undefined(fmt::format("{} object has no element {}", type_name(subject), index));
    }
  }
  if (key.is_string()) {
    if (subject.is_object()) return subject.object()->attribute(key.string());
    switch (method_kind(subject, key.string())) {
      case MethodKind::safe: return Value(std::make_shared<BoundMethodObject>(subject, key.string()));
      case MethodKind::unsafe:
        return Value::undefined(fmt::format("access to attribute '{}' of '{}' object is unsafe.", key.string(), type_name(subject)), true);
      case MethodKind::none: break;
    }
    return Value::undefined(fmt::format("'{}' has no attribute '{}'", subject.is_dict() ? "dict object" : type_name(subject), key.string()));
  }
  return Value::undefined(fmt::format("'{}' has no element {}", type_name(subject), repr(key)));
}

Value Renderer::call(const Value& callee, CallArgs& args, int line) {
  if (callee.is_undefined()) {
    if (callee.undefined_is_security()) error(line, "{}", callee.undefined_message());
    undefined_error(line, callee);
  }
  if (!callee.is_object() || !callee.object()->is_callable()) error(line, "'{}' object is not callable", type_name(callee));
  step(line);
  return callee.object()->call(*this, args, line);
}

std::vector<Value> Renderer::iterate(const Value& value, int line) {
  std::vector<Value> items;
  if (value.is_undefined()) return items;
  if (value.is_object()) {
    if (auto* generator = dynamic_cast<GeneratorObject*>(value.object())) return generator->take();
    error(line, "'{}' object is not iterable", type_name(value));
  }
  const Json& data = value.data();
  if (data.is_array()) {
    items.reserve(data.size());
    for (const auto& item : data) items.push_back(value.item(item));
  } else if (data.is_object()) {
    items.reserve(data.size());
    for (const auto& [key, item] : data.items()) items.emplace_back(Json(key));
  } else if (data.is_string()) {
    const auto& text = data.get_ref<const std::string&>();
    for (const char32_t c : py::decode(text)) items.emplace_back(Json(py::encode(std::u32string(1, c))));
  } else {
    error(line, "'{}' object is not iterable", type_name(value));
  }
  step(line, items.size() * 64);
  return items;
}

Json Renderer::to_json(const Value& value, int line) const {
  if (value.is_data()) {
    try {
      check_nesting(value.data(), "a list or dict the template builds", 127);  // copies and prints recurse
    } catch (const Error& error) {
      unsupported(line, "{}", error.what());
    }
    return value.data();
  }
  if (value.is_undefined())
    unsupported(line, "an undefined value ({}) stored in a list or dict", value.undefined_message());
  unsupported(line, "a {} stored in a list or dict", type_name(value));
}

Value Renderer::make_list(std::vector<Value> items, int line) {
  Json out = Json::array();
  for (const auto& item : items) out.push_back(to_json(item, line));
  check_data(line, out);
  const bool tuples = !items.empty() && std::all_of(items.begin(), items.end(), [](const Value& v) { return v.is_tuple(); });
  return tuples ? Value::tuple_list(std::move(out)) : Value(std::move(out));
}

}  // namespace hpctrain::chat
