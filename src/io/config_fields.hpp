// Private to src/io: typed reads of a JSON object's fields with errors that name the source, the field,
// the expected type and the value found (config.json is user-edited; "n_layers": "6" must say so).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hpctrain::io::detail {

class ConfigFields {
 public:
  ConfigFields(const nlohmann::json& object, std::string source) : object_(object), source_(std::move(source)) {}

  // Present and not null.
  [[nodiscard]] bool has(const char* key) const;
  // Each reader returns `fallback` when the key is absent; null is a type error unless the reader is
  // optional_* (null -> nullopt).
  [[nodiscard]] std::int64_t integer(const char* key, std::int64_t fallback) const;
  [[nodiscard]] std::optional<std::int64_t> optional_integer(const char* key,
                                                             std::optional<std::int64_t> fallback) const;
  [[nodiscard]] double number(const char* key, double fallback) const;
  [[nodiscard]] std::optional<double> optional_number(const char* key, std::optional<double> fallback) const;
  [[nodiscard]] bool boolean(const char* key, bool fallback) const;
  [[nodiscard]] std::string string(const char* key, std::string fallback) const;
  // Absent or null -> fallback.
  [[nodiscard]] std::string optional_string(const char* key, std::string fallback) const;
  [[nodiscard]] std::vector<std::int64_t> integer_list(const char* key, std::vector<std::int64_t> fallback) const;
  // Absent or null -> empty.
  [[nodiscard]] std::vector<std::string> string_list(const char* key) const;

  [[noreturn]] void wrong_type(const char* key, std::string_view expected) const;
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const nlohmann::json& object() const { return object_; }

 private:
  [[nodiscard]] const nlohmann::json* find(const char* key) const;
  const nlohmann::json& object_;
  std::string source_;
};

// "string \"6\"", "number 6.5", "null", ... for messages (long values shortened).
[[nodiscard]] std::string describe_json(const nlohmann::json& value);

}  // namespace hpctrain::io::detail
