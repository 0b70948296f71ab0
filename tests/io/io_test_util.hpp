// Helpers for the io tests: a scratch folder, raw file bytes, and error-message checks.
#pragma once

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/dtype.hpp"

#include <boost/test/unit_test.hpp>

#include <atomic>
#include <optional>
#include <ostream>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

namespace hpctrain::io {
// Printers Boost.Test finds by ADL when a check on these types fails.
inline std::ostream& boost_test_print_type(std::ostream& out, DType dtype) { return out << dtype_name(dtype); }
}  // namespace hpctrain::io

// Boost.Test prints the operands of a failed check; std::optional has no operator<<.
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<hpctrain::io::DType>)
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<std::int64_t>)
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<std::size_t>)

namespace hpctrain::io::test {

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("hpctrain-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  BOOST_REQUIRE(out.good());
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE(in.good());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline std::string le_u64(std::uint64_t value) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((value >> (8 * i)) & 0xFF);
  return out;
}

// A safetensors file from a header text (used as is, not padded) and raw data bytes.
inline std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return le_u64(header.size()) + header + data;
}

template <typename T>
std::string raw_bytes(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), std::data(values), out.size());
  return out;
}

template <typename T>
T element(const TensorView& tensor, std::size_t i) {
  BOOST_REQUIRE((i + 1) * sizeof(T) <= tensor.nbytes);
  T value;
  std::memcpy(&value, tensor.data + i * sizeof(T), sizeof(T));
  return value;
}

// A view over caller-owned bytes.
inline TensorView view_of(const std::string& name, DType dtype, std::vector<std::int64_t> shape, const std::string& bytes) {
  return TensorView{name, dtype, std::move(shape), reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()};
}

// Runs `action`, requires an hpctrain::Error whose message contains every fragment.
template <typename Action>
void require_error(Action&& action, std::initializer_list<std::string> fragments) {
  try {
    action();
  } catch (const Error& error) {
    const std::string message = error.what();
    BOOST_TEST_MESSAGE("error: " << message);
    for (const std::string& fragment : fragments) {
      BOOST_CHECK_MESSAGE(message.find(fragment) != std::string::npos,
                          "message lacks '" << fragment << "': " << message);
    }
    return;
  }
  BOOST_ERROR("expected hpctrain::Error containing '" << *fragments.begin() << "', got none");
}

}  // namespace hpctrain::io::test
