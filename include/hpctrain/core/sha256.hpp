// SHA-256 (FIPS 180-4), self-contained: fingerprints of vocab and data files recorded in checkpoints.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace hpctrain {

// Incremental hasher: update() any number of times, then hex_digest() once.
class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  [[nodiscard]] std::array<uint8_t, 32> digest();
  [[nodiscard]] std::string hex_digest();  // 64 lowercase hex characters

 private:
  void compress(const uint8_t* block);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;        // bytes in buffer_
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

[[nodiscard]] std::string sha256_hex(std::string_view bytes);
// Hashes a file's bytes; throws hpctrain::Error naming the file when it cannot be read.
[[nodiscard]] std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace hpctrain
