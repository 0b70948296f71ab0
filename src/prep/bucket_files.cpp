// `prep text`'s external shuffle through bucket files (Note [Bucket files] in text_prep_parts.hpp).
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "hpctrain/core/error.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep::detail {
namespace {

// One example in a bucket file: position, label, source row, token count, ids, then token types (pairs), then the
// loss mask (prep sft).
struct RecordHead {
  uint32_t position;
  uint32_t tokens;
  int64_t label;
  int64_t source_index;
};

template <typename T>
void put(std::string& out, const T* data, std::size_t count) {
  out.append(reinterpret_cast<const char*>(data), sizeof(T) * count);
}

std::string read_whole(const std::filesystem::path& path, int rank) {
  std::ifstream in(path, std::ios::binary);
  HPCTRAIN_CHECK(in.good(),
                 "cannot read '{}', written by rank {}: {}; with several ranks the output's folder must be on a file "
                 "system that every rank sees",
                 path.string(), rank, std::strerror(errno));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

BucketWriter::BucketWriter(std::filesystem::path stem, int rank, const std::vector<int64_t>& split_sizes,
                           int64_t rows_per_bucket, std::size_t buffer_bytes)
    : stem_(std::move(stem)), rank_(rank), rows_per_bucket_(rows_per_bucket), buffer_bytes_(buffer_bytes) {
  for (std::size_t s = 0; s < split_sizes.size(); ++s) {
    first_index_.push_back(bucket_of_index_.size());
    for (int64_t b = 0; b * rows_per_bucket < split_sizes[s]; ++b) bucket_of_index_.emplace_back(s, b);
  }
  buffers_.resize(bucket_of_index_.size());
}

BucketWriter::~BucketWriter() {
  std::error_code ignored;
  for (const auto& [split, bucket] : bucket_of_index_) std::filesystem::remove(path(stem_, rank_, split, bucket), ignored);
}

std::filesystem::path BucketWriter::path(const std::filesystem::path& stem, int rank, std::size_t split, int64_t bucket) {
  return fmt::format("{}.r{}.s{}.b{}", stem.string(), rank, split, bucket);
}

void BucketWriter::add(std::size_t split, uint32_t position, const data::TextExamples& examples, int64_t i) {
  const std::size_t index = first_index_[split] + position / static_cast<uint64_t>(rows_per_bucket_);
  const RecordHead head{position, static_cast<uint32_t>(examples.length(i)), examples.labels[i], examples.source_index[i]};
  std::string& buffer = buffers_[index];
  put(buffer, &head, 1);
  put(buffer, examples.input_ids.data() + examples.offsets[i], head.tokens);
  if (examples.has_token_type_ids()) put(buffer, examples.token_type_ids.data() + examples.offsets[i], head.tokens);
  if (examples.has_loss_mask()) put(buffer, examples.loss_mask.data() + examples.offsets[i], head.tokens);
  if (buffer.size() >= buffer_bytes_) write(index);
}

void BucketWriter::write(std::size_t index) {
  const auto [split, bucket] = bucket_of_index_[index];
  const auto file_path = path(stem_, rank_, split, bucket);
  std::FILE* file = std::fopen(file_path.c_str(), "ab");
  HPCTRAIN_CHECK(file != nullptr, "cannot write the temporary '{}': {}", file_path.string(), std::strerror(errno));
  const std::string& buffer = buffers_[index];
  const bool ok = std::fwrite(buffer.data(), 1, buffer.size(), file) == buffer.size();
  const bool closed = std::fclose(file) == 0;
  HPCTRAIN_CHECK(ok && closed, "cannot write {} bytes to the temporary '{}': {}", buffer.size(), file_path.string(),
                 std::strerror(errno));
  std::string().swap(buffers_[index]);
}

void BucketWriter::flush() {
  for (std::size_t index = 0; index < buffers_.size(); ++index) write(index);
}

data::TextExamples read_bucket(const std::filesystem::path& stem, int ranks, std::size_t split, int64_t bucket,
                               int64_t rows_per_bucket, int64_t count, bool pairs, bool loss_mask) {
  std::string bytes;
  for (int r = 0; r < ranks; ++r) {
    const auto file_path = BucketWriter::path(stem, r, split, bucket);
    bytes += read_whole(file_path, r);
    std::filesystem::remove(file_path);
  }
  const int64_t first = bucket * rows_per_bucket;
  std::vector<std::size_t> at(static_cast<std::size_t>(count), std::numeric_limits<std::size_t>::max());
  for (std::size_t offset = 0; offset < bytes.size();) {
    RecordHead head;
    HPCTRAIN_CHECK(offset + sizeof head <= bytes.size(), "internal error: bucket {} of split {} is truncated", bucket, split);
    std::memcpy(&head, bytes.data() + offset, sizeof head);
    const int64_t slot = static_cast<int64_t>(head.position) - first;
    HPCTRAIN_CHECK(slot >= 0 && slot < count && at[static_cast<std::size_t>(slot)] == std::numeric_limits<std::size_t>::max(),
                   "internal error: bucket {} of split {} holds position {} twice or out of range", bucket, split, head.position);
    at[static_cast<std::size_t>(slot)] = offset;
    offset += sizeof head + head.tokens * (sizeof(int32_t) + (pairs ? 1 : 0) + (loss_mask ? 1 : 0));
  }
  data::TextExamples out;
  std::vector<int32_t> ids;
  std::vector<uint8_t> types, mask;
  for (int64_t slot = 0; slot < count; ++slot) {
    const std::size_t offset = at[static_cast<std::size_t>(slot)];
    HPCTRAIN_CHECK(offset != std::numeric_limits<std::size_t>::max(),
                   "internal error: position {} of split {} is missing from its bucket", first + slot, split);
    RecordHead head;
    std::memcpy(&head, bytes.data() + offset, sizeof head);
    const char* payload = bytes.data() + offset + sizeof head;
    ids.resize(head.tokens);
    std::memcpy(ids.data(), payload, head.tokens * sizeof(int32_t));
    const char* extras = payload + head.tokens * sizeof(int32_t);
    types.assign(extras, pairs ? extras + head.tokens : extras);
    if (pairs) extras += head.tokens;
    mask.assign(extras, loss_mask ? extras + head.tokens : extras);
    out.append(ids, types, head.label, head.source_index, /*starts=*/{}, mask);
  }
  return out;
}

}  // namespace hpctrain::prep::detail
