// Test helper shared by the test areas that include it: the message of the Error an action throws.
#pragma once

#include <string>

#include "hpctrain/core/error.hpp"

namespace hpctrain::testing {

// The message of the Error `action` throws ("" when it does not throw).
template <typename Action>
std::string error_message(Action&& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace hpctrain::testing
