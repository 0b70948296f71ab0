// Errors: one exception type whose message says what, where, expected and got.
// Library code throws hpctrain::Error; main() catches it once and ends the job (see Note [Errors end the job]).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace hpctrain {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// A file could not be read: an I/O error, or corrupt or truncated compressed data (data::ByteSource). The
// type tells a damaged file from a bad record without reading the message.
class ReadError : public Error {
 public:
  using Error::Error;
};

// Throws ReadError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail_read(fmt::format_string<Args...> format, Args&&... args) {
  throw ReadError(fmt::format(format, std::forward<Args>(args)...));
}

// The operating system refused memory where no std::bad_alloc is thrown (mmap with ENOMEM, e.g. under ulimit -v).
// core::is_allocation_failure counts it as an allocation failure, so the message gains what is left and which
// limit applies, as for a failed tensor allocation.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

}  // namespace hpctrain

// Checks a condition that depends on input; on failure throws hpctrain::Error with the message.
#define HPCTRAIN_CHECK(cond, ...)       \
  do {                                  \
    if (!(cond)) ::hpctrain::fail(__VA_ARGS__); \
  } while (0)
