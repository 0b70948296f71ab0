// parse_json_text (json_text.hpp).
#include "hpctrain/io/json_text.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::io {

nlohmann::json parse_json_text(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON (truncated or damaged?): {}", source, error.what());
  }
}

}  // namespace hpctrain::io
