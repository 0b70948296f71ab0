// Template values and Python's semantics on them (value.hpp, Note [Template values]).
#include "chat/value.hpp"

#include <fmt/format.h>

#include <cmath>

#include "chat/pystr.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

void append_repr_json(std::string& out, const Json& data);

void append_str_json(std::string& out, const Json& data) {
  switch (data.type()) {
    case Json::value_t::string: out += data.get_ref<const std::string&>(); return;
    case Json::value_t::null: out += "None"; return;
    case Json::value_t::boolean: out += data.get<bool>() ? "True" : "False"; return;
    case Json::value_t::number_integer: out += std::to_string(data.get<int64_t>()); return;
    case Json::value_t::number_unsigned: out += std::to_string(data.get<uint64_t>()); return;
    case Json::value_t::number_float: out += py::float_repr(data.get<double>()); return;
    default: append_repr_json(out, data); return;
  }
}

void append_repr_json(std::string& out, const Json& data) {
  if (data.is_string()) {
    out += py::repr(data.get_ref<const std::string&>());
  } else if (data.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (i > 0) out += ", ";
      append_repr_json(out, data[i]);
    }
    out += ']';
  } else if (data.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : data.items()) {
      if (!first) out += ", ";
      first = false;
      out += py::repr(key);
      out += ": ";
      append_repr_json(out, item);
    }
    out += '}';
  } else if (data.is_binary() || data.is_discarded()) {
    fail("a template value of an unknown type");
  } else {
    append_str_json(out, data);
  }
}

int sign(double d) { return d < 0 ? -1 : (d > 0 ? 1 : 0); }

bool is_numeric(const Json& data) { return data.is_number() || data.is_boolean(); }

}  // namespace

std::string Object::str() const { fail("printing a {} is not supported (Python would print its address)", type_name()); }

Value Object::attribute(const std::string& name) const {
  return Value::undefined(fmt::format("'{}' object has no attribute '{}'", type_name(), name));
}

Value Object::call(Renderer&, CallArgs&, int) { fail("'{}' object is not callable", type_name()); }

Value Value::undefined(std::string message, bool security) {
  Value value;
  value.reason_ = std::make_shared<const UndefinedReason>(UndefinedReason{std::move(message), security});
  return value;
}

std::string Value::undefined_message() const { return reason_ ? reason_->message : "undefined value"; }

std::string type_name(const Value& value) {
  if (value.is_undefined()) return "Undefined";
  if (value.is_object()) return value.object()->type_name();
  switch (value.data().type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return "unknown";
  }
}

bool truthy(const Value& value) {
  if (value.is_undefined()) return false;
  if (value.is_object()) return true;
  const Json& data = value.data();
  switch (data.type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return data.get<bool>();
    case Json::value_t::number_integer: return data.get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return data.get<uint64_t>() != 0;
    case Json::value_t::number_float: return data.get<double>() != 0.0;
    case Json::value_t::string: return !data.get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object: return !data.empty();
    default: return false;
  }
}

void append_str(std::string& out, const Value& value) {
  if (value.is_undefined()) return;  // Jinja's default Undefined prints as ""
  if (value.is_object()) {
    out += value.object()->str();
    return;
  }
  if (value.is_tuple() || value.has_tuple_items() || value.is_view()) {
    out += repr(value);
    return;
  }
  append_str_json(out, value.data());
}

std::string str(const Value& value) {
  if (value.is_string()) return value.string();
  std::string out;
  append_str(out, value);
  return out;
}

std::string repr_json(const Json& data) {
  std::string out;
  append_repr_json(out, data);
  return out;
}

std::string repr(const Value& value) {
  if (value.is_undefined()) return "Undefined";
  if (value.is_object()) return value.object()->str();
  if (value.is_view()) fail("printing a dict view (items(), keys(), values()) is not supported: use |list");
  const Json& data = value.data();
  if (value.is_tuple() || value.has_tuple_items()) {
    const bool tuple = value.is_tuple();
    std::string out = tuple ? "(" : "[";
    for (std::size_t i = 0; i < data.size(); ++i) {
      if (i > 0) out += ", ";
      if (tuple || !data[i].is_array()) out += repr_json(data[i]);
      else out += repr(Value::tuple(data[i]));
    }
    return out + (tuple ? (data.size() == 1 ? ",)" : ")") : "]");
  }
  return repr_json(data);
}

int64_t as_int(const Json& data) {
  if (data.is_boolean()) return data.get<bool>() ? 1 : 0;
  if (data.is_number_unsigned()) {
    const auto u = data.get<uint64_t>();
    HPCTRAIN_CHECK(u <= static_cast<uint64_t>(INT64_MAX), "the integer {} is too large (at most 2^63 - 1)", u);
    return static_cast<int64_t>(u);
  }
  return data.get<int64_t>();
}

double as_double(const Json& data) {
  if (data.is_number_float()) return data.get<double>();
  if (data.is_number_unsigned()) return static_cast<double>(data.get<uint64_t>());
  return static_cast<double>(as_int(data));
}

bool equal_json(const Json& a, const Json& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (a.is_number_float() || b.is_number_float()) return as_double(a) == as_double(b);
    if (a.is_number_unsigned() || b.is_number_unsigned()) {
      if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
      const Json& u = a.is_number_unsigned() ? a : b;
      const Json& s = a.is_number_unsigned() ? b : a;
      const int64_t signed_value = as_int(s);
      return signed_value >= 0 && static_cast<uint64_t>(signed_value) == u.get<uint64_t>();
    }
    return as_int(a) == as_int(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!equal_json(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [key, item] : a.items()) {
      const auto other = b.find(key);
      if (other == b.end() || !equal_json(item, *other)) return false;
    }
    return true;
  }
  return a == b;
}

bool equal(const Value& value, const Value& other) {
  if (value.is_undefined() || other.is_undefined()) return value.is_undefined() && other.is_undefined();
  if (value.is_object() || other.is_object()) return value.object() == other.object();
  return equal_json(value.data(), other.data());
}

int compare_json(const Json& a, const Json& b) {
  if (is_numeric(a) && is_numeric(b)) {
    if (!a.is_number_float() && !b.is_number_float() && !a.is_number_unsigned() && !b.is_number_unsigned()) {
      const int64_t x = as_int(a), y = as_int(b);
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return sign(as_double(a) - as_double(b));
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order is code point order, which is Python's order of str.
    const int c = a.get_ref<const std::string&>().compare(b.get_ref<const std::string&>());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_array() && b.is_array()) {
    const std::size_t n = std::min(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i)
      if (!equal_json(a[i], b[i])) return compare_json(a[i], b[i]);
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '{}' and '{}'", type_name(Value(a)), type_name(Value(b)));
}

int compare(const Value& a, const Value& b) {
  if (!a.is_data() || !b.is_data())
    fail("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
  return compare_json(a.data(), b.data());
}

}  // namespace hpctrain::chat
