#include "io/config_fields.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::io::detail {
namespace {
using nlohmann::json;

std::string shortened(std::string text) {
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

bool looks_numeric(const json& value) {
  if (!value.is_string()) return false;
  const auto parsed = json::parse(value.get<std::string>(), nullptr, false);
  return parsed.is_number();
}
}  // namespace

std::string describe_json(const json& value) {
  const std::string text = shortened(value.dump(-1, ' ', false, json::error_handler_t::replace));
  switch (value.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "boolean " + text;
    case json::value_t::string: return "string " + text;
    case json::value_t::array: return "array " + text;
    case json::value_t::object: return "object " + text;
    default: return "number " + text;
  }
}

const json* ConfigFields::find(const char* key) const {
  const auto found = object_.find(key);
  return found == object_.end() ? nullptr : &*found;
}

bool ConfigFields::has(const char* key) const {
  const json* value = find(key);
  return value != nullptr && !value->is_null();
}

void ConfigFields::wrong_type(const char* key, std::string_view expected) const {
  const json& value = *find(key);
  const char* hint = looks_numeric(value) ? ". Hint: write numbers without quotes" : "";
  fail("{}: field '{}' must be {}, got {}{}", source_, key, expected, describe_json(value), hint);
}

std::int64_t ConfigFields::integer(const char* key, std::int64_t fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_number_integer() ||
      (value->is_number_unsigned() && value->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))) {
    wrong_type(key, "an integer");
  }
  return value->get<std::int64_t>();
}

std::optional<std::int64_t> ConfigFields::optional_integer(const char* key,
                                                           std::optional<std::int64_t> fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (value->is_null()) return std::nullopt;
  return integer(key, 0);
}

double ConfigFields::number(const char* key, double fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_number()) wrong_type(key, "a number");
  return value->get<double>();
}

std::optional<double> ConfigFields::optional_number(const char* key, std::optional<double> fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (value->is_null()) return std::nullopt;
  return number(key, 0.0);
}

bool ConfigFields::boolean(const char* key, bool fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_boolean()) wrong_type(key, "true or false");
  return value->get<bool>();
}

std::string ConfigFields::string(const char* key, std::string fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_string()) wrong_type(key, "a string");
  return value->get<std::string>();
}

std::string ConfigFields::optional_string(const char* key, std::string fallback) const {
  return has(key) ? string(key, "") : fallback;
}

std::vector<std::int64_t> ConfigFields::integer_list(const char* key, std::vector<std::int64_t> fallback) const {
  const json* value = find(key);
  if (value == nullptr) return fallback;
  if (!value->is_array()) wrong_type(key, "an array of integers");
  std::vector<std::int64_t> out;
  for (const json& item : *value) {
    if (!item.is_number_integer() ||
        (item.is_number_unsigned() && item.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))) {
      wrong_type(key, "an array of integers");
    }
    out.push_back(item.get<std::int64_t>());
  }
  return out;
}

std::vector<std::string> ConfigFields::string_list(const char* key) const {
  if (!has(key)) return {};
  const json& value = *find(key);
  if (!value.is_array()) wrong_type(key, "an array of strings");
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) wrong_type(key, "an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace hpctrain::io::detail
