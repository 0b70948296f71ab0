// dataset_identity (dataset_identity.hpp): a dataset file's identity from its reader, without its path.
#include "hpctrain/data/dataset_identity.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "hpctrain/core/sha256.hpp"

namespace hpctrain::data {
namespace {

// Examples of each split whose contents enter the digest (a few KiB of reads per split).
constexpr int64_t kDigestExamples = 256;

template <typename T>
void hash_values(Sha256& hash, const std::vector<T>& values) {
  hash.update(std::string_view(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

void hash_split(Sha256& hash, const DatasetReader& reader, const SplitInfo& info) {
  hash.update(fmt::format("split {} {} {} {} {}x{}x{} mean {} std {}\n", info.name, info.num_examples, info.num_tokens,
                          info.has_token_type_ids, info.channels, info.height, info.width, fmt::join(info.mean, ","),
                          fmt::join(info.std, ",")));
  if (info.has_loss_mask) hash.update("loss_mask\n");  // (files without one keep the digest they always had)
  const int64_t first = std::min(info.num_examples, kDigestExamples);
  if (is_text_task(reader.task())) {
    const TextExamples text = reader.read_text(info.name, 0, first);
    hash_values(hash, text.input_ids), hash_values(hash, text.offsets), hash_values(hash, text.labels);
    hash_values(hash, text.token_type_ids);
    hash_values(hash, text.document_start);  // empty (nothing hashed) in files without document boundaries
    hash_values(hash, text.loss_mask);
  } else {
    const ImageExamples images = reader.read_images(info.name, 0, first);
    hash_values(hash, images.pixels), hash_values(hash, images.labels);
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> dataset_identity(const DatasetReader& reader) {
  std::vector<std::string> splits;
  Sha256 hash;
  hash.update(reader.tokenizer().dump() + "\n" + reader.source() + "\n" + reader.created_by() + "\n");
  for (const std::string& split : reader.splits()) {
    const SplitInfo info = reader.split_info(split);
    splits.push_back(fmt::format("{} {}", split, info.num_examples));
    hash_split(hash, reader, info);
  }
  return {{"file size", fmt::format("{} bytes", std::filesystem::file_size(reader.path()))},
          {"schema version", std::to_string(schema::kFormatVersion)},
          {"task", std::string(to_string(reader.task()))},
          {"label names", fmt::format("{}", fmt::join(reader.label_names(), ","))},
          {"splits", fmt::format("{}", fmt::join(splits, ", "))},
          {"content digest", "sha256:" + hash.hex_digest().substr(0, 16)}};
}

}  // namespace hpctrain::data
