// Typed, checked access to fields of a JSON object; errors name the file, the field path, what was expected and
// what was found, e.g. "tokenizer_config.json: field 'do_lower_case': expected a boolean, got \"yes\"".
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace hpctrain::tokenize {
class Vocab;
}

namespace hpctrain::tokenize::detail {

// Parses a JSON file; throws hpctrain::Error naming the file on I/O or syntax errors.
nlohmann::json read_json_file(const std::filesystem::path& file);

class JsonObject {
 public:
  // value must be an object; path is the field path of value inside the file ("" for the root).
  JsonObject(const nlohmann::json& value, std::string file, std::string path);

  [[nodiscard]] bool has(const std::string& field) const;  // present and not null
  [[nodiscard]] const nlohmann::json& at(const std::string& field) const;  // throws when absent
  [[nodiscard]] bool get_bool(const std::string& field, bool fallback) const;
  [[nodiscard]] std::optional<bool> get_optional_bool(const std::string& field) const;  // absent or null: nullopt
  [[nodiscard]] int64_t get_int(const std::string& field, int64_t fallback) const;
  [[nodiscard]] std::string get_string(const std::string& field, const std::string& fallback) const;
  [[nodiscard]] std::string required_string(const std::string& field) const;
  // A token field: a string or an AddedToken object {"content": ...}; absent or null: fallback.
  [[nodiscard]] std::string get_token(const std::string& field, const std::string& fallback) const;
  [[nodiscard]] JsonObject object(const std::string& field) const;
  [[nodiscard]] const nlohmann::json& array(const std::string& field) const;

  [[nodiscard]] const nlohmann::json& json() const { return value_; }
  [[nodiscard]] const std::string& file() const { return file_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string field_name(const std::string& field) const;  // "model.vocab"
  // Throws "<file>: field '<path.field>': expected <expected>, got <value>".
  [[noreturn]] void fail_field(const std::string& field, const std::string& expected, const nlohmann::json& got) const;

 private:
  const nlohmann::json& value_;
  std::string file_;
  std::string path_;
};

// tokenizer.json's model.vocab ({"token": id}): every id in [0, size) exactly once, else an Error naming the
// file, the field and the token (WordPiece and BPE models alike).
[[nodiscard]] Vocab read_model_vocab(const JsonObject& model);

}  // namespace hpctrain::tokenize::detail
