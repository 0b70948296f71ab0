// Private: the values a chat template computes with, and Python's semantics on them (truth, str(), repr(), ==, <).
//
// Note [Template values]
// Data is nlohmann::ordered_json (Python's dicts keep insertion order, and tojson and items() show it), held by a
// shared pointer that may alias a node inside a larger document: `messages[0].content` points into the messages
// without copying them. Computed data (strings, lists, numbers) is a fresh document. What is not data is an Object:
// a macro, a built-in function, a bound method (`message.get`), a namespace, a loop, a generator (what Jinja's
// map/select/... return). An undefined value carries the reason Jinja would give when it is used ("'x' is
// undefined"). Lists and dicts hold data only: storing an undefined value or an object inside one is refused
// (Error), never silently turned into something else. JSON integers are Python ints, JSON floats Python floats.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace hpctrain::chat {

using Json = nlohmann::ordered_json;

class Value;

// Arguments of a call: positional, then keyword, in the order written.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Renderer;

// A value that is not data (Note [Template values]).
class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, for error messages ("Macro", "namespace", "generator").
  [[nodiscard]] virtual std::string type_name() const = 0;
  // str(self); Error when Python's text would not be reproducible (an address).
  [[nodiscard]] virtual std::string str() const;
  // self.name, or an undefined value.
  [[nodiscard]] virtual Value attribute(const std::string& name) const;
  [[nodiscard]] virtual bool is_callable() const { return false; }
  // self(args) at template line `line`.
  virtual Value call(Renderer& renderer, CallArgs& args, int line);
};

// Why a value is undefined: Jinja's message when it is used, and whether using it is a sandbox violation.
struct UndefinedReason {
  std::string message;
  bool security = false;
};

class Value {
 public:
  Value() = default;  // undefined
  explicit Value(Json data) : data_(std::make_shared<const Json>(std::move(data))) {}
  // A node inside `root` (shares its ownership).
  Value(const std::shared_ptr<const Json>& root, const Json& node) : data_(root, &node) {}
  explicit Value(std::shared_ptr<Object> object) : object_(std::move(object)) {}

  static Value undefined(std::string message, bool security = false);
  // A string marked safe (markupsafe's Markup: what |safe and |escape return): it prints as a str, but `+`
  // escapes a plain string added to it, as Markup does.
  static Value markup(std::string text) { return Value(Json(std::move(text))).with(kMarkup); }
  // A tuple (Jinja's `(a, b)`, an item pair): data like a list, but Python prints it as one and `%` takes it as
  // arguments.
  static Value tuple(Json items) { return Value(std::move(items)).with(kTuple); }
  // A list whose items are tuples (|items|list, |dictsort): printed as Python prints such a list.
  static Value tuple_list(Json items) { return Value(std::move(items)).with(kTupleItems); }
  // dict.items() / keys() / values(): iterable like a list, but Python prints a view ("dict_items([...])"), which
  // is refused.
  static Value view(Json items, bool tuple_items) {
    return Value(std::move(items)).with(static_cast<uint8_t>(kView | (tuple_items ? kTupleItems : 0)));
  }

  [[nodiscard]] bool is_undefined() const { return !data_ && !object_; }
  [[nodiscard]] bool is_data() const { return data_ != nullptr; }
  [[nodiscard]] bool is_object() const { return object_ != nullptr; }
  [[nodiscard]] const Json& data() const { return *data_; }
  [[nodiscard]] const std::shared_ptr<const Json>& data_pointer() const { return data_; }
  [[nodiscard]] Object* object() const { return object_.get(); }
  [[nodiscard]] const std::shared_ptr<Object>& object_pointer() const { return object_; }
  // A child node of this data value, sharing its ownership.
  [[nodiscard]] Value child(const Json& node) const { return Value(data_, node); }
  // An item of this list as iteration yields it (a tuple when the list holds tuples).
  [[nodiscard]] Value item(const Json& node) const {
    Value value(data_, node);
    if (has_tuple_items() && node.is_array()) value.flags_ = kTuple;
    return value;
  }
  // Jinja's message for using this undefined value.
  [[nodiscard]] std::string undefined_message() const;
  [[nodiscard]] bool undefined_is_security() const { return reason_ && reason_->security; }

  // Shorthands on data values (false for anything else).
  [[nodiscard]] bool is_none() const { return data_ && data_->is_null(); }
  [[nodiscard]] bool is_bool() const { return data_ && data_->is_boolean(); }
  [[nodiscard]] bool is_int() const { return data_ && (data_->is_number_integer()); }
  [[nodiscard]] bool is_float() const { return data_ && data_->is_number_float(); }
  [[nodiscard]] bool is_number() const { return data_ && (data_->is_number() || data_->is_boolean()); }
  [[nodiscard]] bool is_string() const { return data_ && data_->is_string(); }
  [[nodiscard]] bool is_list() const { return data_ && data_->is_array(); }
  [[nodiscard]] bool is_tuple() const { return (flags_ & kTuple) != 0; }
  [[nodiscard]] bool has_tuple_items() const { return (flags_ & kTupleItems) != 0; }
  [[nodiscard]] bool is_markup() const { return (flags_ & kMarkup) != 0; }
  [[nodiscard]] bool is_view() const { return (flags_ & kView) != 0; }
  [[nodiscard]] bool is_dict() const { return data_ && data_->is_object(); }
  [[nodiscard]] const std::string& string() const { return data_->get_ref<const std::string&>(); }

 private:
  std::shared_ptr<const Json> data_;
  std::shared_ptr<Object> object_;
  static constexpr uint8_t kTuple = 1, kTupleItems = 2, kMarkup = 4, kView = 8;
  Value with(uint8_t flags) && {
    flags_ = flags;
    return std::move(*this);
  }

  std::shared_ptr<const UndefinedReason> reason_;  // undefined values only
  uint8_t flags_ = 0;                              // what Python type the data stands for (above)
};

// Python's type name of a value ("str", "int", "dict", "NoneType", "Undefined", an object's).
[[nodiscard]] std::string type_name(const Value& value);
// bool(value)
[[nodiscard]] bool truthy(const Value& value);
// str(value), appended; repr(value)
void append_str(std::string& out, const Value& value);
[[nodiscard]] std::string str(const Value& value);
[[nodiscard]] std::string repr(const Value& value);
[[nodiscard]] std::string repr_json(const Json& data);
// value == other (Python); numbers compare across int/float/bool.
[[nodiscard]] bool equal(const Value& value, const Value& other);
[[nodiscard]] bool equal_json(const Json& a, const Json& b);
// Python's a < b: -1, 0 or 1; throws Error (TypeError's message) for types Python cannot order.
[[nodiscard]] int compare(const Value& a, const Value& b);
[[nodiscard]] int compare_json(const Json& a, const Json& b);
// The number of a bool/int value as int64 (bool is an int in Python); the number of any numeric value as double.
[[nodiscard]] int64_t as_int(const Json& data);
[[nodiscard]] double as_double(const Json& data);

}  // namespace hpctrain::chat
