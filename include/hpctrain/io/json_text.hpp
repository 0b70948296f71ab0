// JSON parsing whose errors name the file the text came from (a truncated trainer_state.json, config.json, ...).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace hpctrain::io {

// Parses `text`, read from `source` (a path, for messages). Error: "SOURCE: not valid JSON (truncated or
// damaged?): <parser message>".
[[nodiscard]] nlohmann::json parse_json_text(std::string_view text, const std::string& source);

}  // namespace hpctrain::io
