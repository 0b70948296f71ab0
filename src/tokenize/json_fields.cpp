// Checked JSON field access for tokenizer files.
#include "tokenize/json_fields.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/vocab.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

namespace hpctrain::tokenize::detail {
namespace {

std::string shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "{}: cannot open file for reading", file.string());
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: invalid JSON: {}", file.string(), e.what());
  }
}

JsonObject::JsonObject(const nlohmann::json& value, std::string file, std::string path)
    : value_(value), file_(std::move(file)), path_(std::move(path)) {
  if (!value_.is_object()) {
    fail("{}: {}: expected a JSON object, got {}", file_, path_.empty() ? "top level" : "field '" + path_ + "'",
         shown(value_));
  }
}

std::string JsonObject::field_name(const std::string& field) const {
  return path_.empty() ? field : path_ + "." + field;
}

void JsonObject::fail_field(const std::string& field, const std::string& expected, const nlohmann::json& got) const {
  fail("{}: field '{}': expected {}, got {}", file_, field_name(field), expected, shown(got));
}

bool JsonObject::has(const std::string& field) const {
  const auto it = value_.find(field);
  return it != value_.end() && !it->is_null();
}

const nlohmann::json& JsonObject::at(const std::string& field) const {
  const auto it = value_.find(field);
  if (it == value_.end()) fail("{}: field '{}' is missing", file_, field_name(field));
  return *it;
}

bool JsonObject::get_bool(const std::string& field, bool fallback) const {
  if (!has(field)) return fallback;
  const auto& value = at(field);
  if (!value.is_boolean()) fail_field(field, "a boolean", value);
  return value.get<bool>();
}

std::optional<bool> JsonObject::get_optional_bool(const std::string& field) const {
  if (!has(field)) return std::nullopt;
  const auto& value = at(field);
  if (!value.is_boolean()) fail_field(field, "a boolean or null", value);
  return value.get<bool>();
}

int64_t JsonObject::get_int(const std::string& field, int64_t fallback) const {
  if (!has(field)) return fallback;
  const auto& value = at(field);
  if (value.is_number_integer()) return value.get<int64_t>();
  // transformers writes model_max_length = 1e30 ("no limit") as a float.
  if (value.is_number_float() && std::isfinite(value.get<double>()) && value.get<double>() >= 9.2e18) {
    return std::numeric_limits<int64_t>::max();
  }
  fail_field(field, "an integer", value);
}

std::string JsonObject::get_string(const std::string& field, const std::string& fallback) const {
  if (!has(field)) return fallback;
  const auto& value = at(field);
  if (!value.is_string()) fail_field(field, "a string", value);
  return value.get<std::string>();
}

std::string JsonObject::required_string(const std::string& field) const {
  const auto& value = at(field);
  if (!value.is_string()) fail_field(field, "a string", value);
  return value.get<std::string>();
}

std::string JsonObject::get_token(const std::string& field, const std::string& fallback) const {
  if (!has(field)) return fallback;
  const auto& value = at(field);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string()) {
    return value["content"].get<std::string>();
  }
  fail_field(field, "a string or an AddedToken object with \"content\"", value);
}

JsonObject JsonObject::object(const std::string& field) const {
  const auto& value = at(field);
  if (!value.is_object()) fail_field(field, "a JSON object", value);
  return JsonObject(value, file_, field_name(field));
}

const nlohmann::json& JsonObject::array(const std::string& field) const {
  const auto& value = at(field);
  if (!value.is_array()) fail_field(field, "a JSON array", value);
  return value;
}

Vocab read_model_vocab(const JsonObject& model) {
  const JsonObject vocab = model.object("vocab");
  // ids in [0, size) without duplicates leave no gaps.
  const size_t size = vocab.json().size();
  std::vector<std::string> tokens(size);
  for (const auto& [token, id_json] : vocab.json().items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || size_t(id_json.get<int64_t>()) >= size) {
      vocab.fail_field(token, fmt::format("an id in [0, {})", size), id_json);
    }
    std::string& slot = tokens[size_t(id_json.get<int64_t>())];
    if (!slot.empty()) {
      fail("{}: field '{}': tokens '{}' and '{}' have the same id {}", vocab.file(), vocab.path(), slot, token,
           id_json.get<int64_t>());
    }
    slot = token;
  }
  return Vocab::from_tokens(std::move(tokens), vocab.file() + ": field '" + vocab.path() + "'");
}

}  // namespace hpctrain::tokenize::detail
