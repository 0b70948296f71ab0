// Jinja's tests (`x is defined`, `x is string`, ...) as jinja2/tests.py defines them on Python values
// (renderer.hpp). Python's answers on an undefined value are kept: it is iterable and a sequence (it has __iter__,
// __len__ and __getitem__), and callable.
#include <unordered_map>

#include "chat/objects.hpp"
#include "chat/pystr.hpp"
#include "chat/renderer.hpp"

namespace hpctrain::chat {
namespace {

using Test = bool (*)(Renderer&, const Value&, CallArgs&, int);

const Value& only_arg(Renderer& r, CallArgs& args, const char* name, int line) {
  if (args.positional.size() != 1 || !args.keyword.empty()) r.error(line, "the test '{}' takes one argument", name);
  return args.positional[0];
}

void no_args(Renderer& r, CallArgs& args, const char* name, int line) {
  if (!args.positional.empty() || !args.keyword.empty()) r.error(line, "the test '{}' takes no arguments", name);
}

int64_t remainder(Renderer& r, const Value& v, int64_t divisor, int line) {
  if (v.is_undefined()) r.undefined_error(line, v);
  if (!v.is_int() && !v.is_bool()) r.unsupported(line, "odd/even/divisibleby of a {}", type_name(v));
  if (divisor == 0) r.error(line, "integer division or modulo by zero");
  const int64_t m = as_int(v.data()) % divisor;
  return m != 0 && ((m < 0) != (divisor < 0)) ? m + divisor : m;
}

int order(Renderer& r, const Value& a, const Value& b, int line) {
  if (a.is_undefined()) r.undefined_error(line, a);
  if (b.is_undefined()) r.undefined_error(line, b);
  try {
    return compare(a, b);
  } catch (const TemplateError&) {
    throw;
  } catch (const Error& failure) {
    r.error(line, "{}", failure.what());
  }
}

#define HPCTRAIN_SIMPLE_TEST(fn, name, expression)             \
  bool fn(Renderer& r, const Value& v, CallArgs& args, int line) { \
    no_args(r, args, name, line);                              \
    return expression;                                         \
  }

HPCTRAIN_SIMPLE_TEST(t_defined, "defined", !v.is_undefined())
HPCTRAIN_SIMPLE_TEST(t_undefined, "undefined", v.is_undefined())
HPCTRAIN_SIMPLE_TEST(t_none, "none", v.is_none())
HPCTRAIN_SIMPLE_TEST(t_boolean, "boolean", v.is_bool())
HPCTRAIN_SIMPLE_TEST(t_false, "false", v.is_bool() && !v.data().get<bool>())
HPCTRAIN_SIMPLE_TEST(t_true, "true", v.is_bool() && v.data().get<bool>())
HPCTRAIN_SIMPLE_TEST(t_integer, "integer", v.is_int())
HPCTRAIN_SIMPLE_TEST(t_float, "float", v.is_float())
HPCTRAIN_SIMPLE_TEST(t_string, "string", v.is_string())
HPCTRAIN_SIMPLE_TEST(t_mapping, "mapping", v.is_dict())
HPCTRAIN_SIMPLE_TEST(t_number, "number", v.is_number())
HPCTRAIN_SIMPLE_TEST(t_escaped, "escaped", v.is_markup())
HPCTRAIN_SIMPLE_TEST(t_sequence, "sequence", v.is_undefined() || v.is_string() || v.is_list() || v.is_dict())
HPCTRAIN_SIMPLE_TEST(t_iterable, "iterable",
                     v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
                         dynamic_cast<GeneratorObject*>(v.object()) || dynamic_cast<LoopObject*>(v.object()))
HPCTRAIN_SIMPLE_TEST(t_callable, "callable", v.is_undefined() || (v.is_object() && v.object()->is_callable()))
HPCTRAIN_SIMPLE_TEST(t_lower, "lower", py::all_of_class(str(v), py::CharClass::lower))
HPCTRAIN_SIMPLE_TEST(t_upper, "upper", py::all_of_class(str(v), py::CharClass::upper))
HPCTRAIN_SIMPLE_TEST(t_odd, "odd", remainder(r, v, 2, line) == 1)
HPCTRAIN_SIMPLE_TEST(t_even, "even", remainder(r, v, 2, line) == 0)
#undef HPCTRAIN_SIMPLE_TEST

bool t_divisibleby(Renderer& r, const Value& v, CallArgs& args, int line) {
  const Value& n = only_arg(r, args, "divisibleby", line);
  if (!n.is_int() && !n.is_bool()) r.unsupported(line, "divisibleby of a {}", type_name(n));
  return remainder(r, v, as_int(n.data()), line) == 0;
}

bool t_in(Renderer& r, const Value& v, CallArgs& args, int line) {
  return contains(r, only_arg(r, args, "in", line), v, line);
}

bool t_sameas(Renderer& r, const Value& v, CallArgs& args, int line) {
  const Value& other = only_arg(r, args, "sameas", line);
  if (v.is_none() || v.is_bool() || other.is_none() || other.is_bool()) return equal(v, other) && v.is_data() && other.is_data() && v.data().type() == other.data().type();
  if (v.is_object() || other.is_object()) return v.object() == other.object();
  if (v.is_data() && other.is_data()) return &v.data() == &other.data();
  return false;
}

bool t_eq(Renderer& r, const Value& v, CallArgs& args, int line) { return equal(v, only_arg(r, args, "eq", line)); }
bool t_ne(Renderer& r, const Value& v, CallArgs& args, int line) { return !equal(v, only_arg(r, args, "ne", line)); }
bool t_lt(Renderer& r, const Value& v, CallArgs& args, int line) { return order(r, v, only_arg(r, args, "lt", line), line) < 0; }
bool t_le(Renderer& r, const Value& v, CallArgs& args, int line) { return order(r, v, only_arg(r, args, "le", line), line) <= 0; }
bool t_gt(Renderer& r, const Value& v, CallArgs& args, int line) { return order(r, v, only_arg(r, args, "gt", line), line) > 0; }
bool t_ge(Renderer& r, const Value& v, CallArgs& args, int line) { return order(r, v, only_arg(r, args, "ge", line), line) >= 0; }

bool t_filter(Renderer& r, const Value& v, CallArgs& args, int line) {
  no_args(r, args, "filter", line);
  return v.is_string() && filter_support(v.string()) != Support::unknown;
}

bool t_test(Renderer& r, const Value& v, CallArgs& args, int line) {
  no_args(r, args, "test", line);
  return v.is_string() && test_support(v.string()) != Support::unknown;
}

const std::unordered_map<std::string, Test>& tests() {
  static const std::unordered_map<std::string, Test> table = {
      {"odd", t_odd},           {"even", t_even},         {"divisibleby", t_divisibleby}, {"defined", t_defined},
      {"undefined", t_undefined}, {"filter", t_filter},   {"test", t_test},               {"none", t_none},
      {"boolean", t_boolean},   {"false", t_false},       {"true", t_true},               {"integer", t_integer},
      {"float", t_float},       {"lower", t_lower},       {"upper", t_upper},             {"string", t_string},
      {"mapping", t_mapping},   {"number", t_number},     {"sequence", t_sequence},       {"iterable", t_iterable},
      {"callable", t_callable}, {"sameas", t_sameas},     {"escaped", t_escaped},         {"in", t_in},
      {"==", t_eq},             {"eq", t_eq},             {"equalto", t_eq},              {"!=", t_ne},
      {"ne", t_ne},             {">", t_gt},              {"gt", t_gt},                   {"greaterthan", t_gt},
      {">=", t_ge},             {"ge", t_ge},             {"<", t_lt},                    {"lt", t_lt},
      {"lessthan", t_lt},       {"<=", t_le},             {"le", t_le},
  };
  return table;
}

}  // namespace

Support test_support(const std::string& name) { return tests().count(name) > 0 ? Support::supported : Support::unknown; }

bool apply_test(Renderer& renderer, const std::string& name, const Value& subject, CallArgs& args, int line) {
  const auto found = tests().find(name);
  if (found == tests().end()) renderer.error(line, "No test named '{}'.", name);
  return found->second(renderer, subject, args, line);
}

}  // namespace hpctrain::chat
