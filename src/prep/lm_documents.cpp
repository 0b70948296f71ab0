// `prep lm`'s documents: record checks, block tokenization and the token streams (lm_documents.hpp).
#include "lm_documents.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "hpctrain/tokenize/utf8.hpp"
#include "lm_packing.hpp"
#include "prep_common.hpp"

namespace hpctrain::prep::detail {

std::optional<std::string> check_document(data::TextRecord& record, const LmPrepOptions& options,
                                          std::map<std::string, int64_t>& skipped, std::optional<BadRow>& bad) {
  auto reject = [&](const char* reason, std::string detail) -> std::optional<std::string> {
    if (options.skip_invalid) ++skipped[reason];
    else bad = BadRow{record.line, record.row, std::move(detail)};
    return std::nullopt;
  };
  if (!record.error.empty()) return reject("malformed row", record.error);
  if (!record.fields[0]) return reject("missing field", fmt::format("missing field '{}'", options.text_field));
  if (is_blank(*record.fields[0])) return reject("empty text", fmt::format("empty text in field '{}'", options.text_field));
  return std::move(*record.fields[0]);
}

std::vector<std::vector<int32_t>> tokenize_documents(const std::vector<std::string>& texts,
                                                     const std::vector<uint8_t>& replaced,
                                                     const DocumentTokenizer& how, std::vector<uint32_t>& full_lengths,
                                                     DocumentCounts& counts) {
  constexpr std::size_t kChunk = 256;
  const std::size_t n = texts.size(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<std::vector<int32_t>> ids(n);
  std::vector<uint32_t> lengths(n);
  std::vector<DocumentCounts> chunk_counts(chunks);
  parallel_chunks(chunks, how.threads, [&](std::size_t c) {
    for (std::size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      // The tokenizer reads invalid UTF-8 as U+FFFD; here we only count such documents.
      chunk_counts[c].invalid_utf8 += replaced[i] || !tokenize::utf8::is_valid(texts[i]) ? 1 : 0;
      ids[i] = how.tokenizer.encode(texts[i]);
      end_with_eos(ids[i], how.eos);
      HPCTRAIN_CHECK(ids[i].size() < UINT32_MAX, "a document of {} tokens: prep lm handles up to {} per document",
                     ids[i].size(), UINT32_MAX - 1);
      lengths[i] = static_cast<uint32_t>(ids[i].size());
      if (how.max_length > 0 && ids[i].size() > static_cast<std::size_t>(how.max_length)) {
        ids[i].resize(static_cast<std::size_t>(how.max_length));
        ++chunk_counts[c].truncated;
      }
    }
  });
  for (const auto& chunk : chunk_counts) {
    counts.invalid_utf8 += chunk.invalid_utf8;
    counts.truncated += chunk.truncated;
  }
  full_lengths.insert(full_lengths.end(), lengths.begin(), lengths.end());
  return ids;
}

std::vector<DocumentInput> document_inputs(const std::vector<std::filesystem::path>& inputs,
                                           const std::filesystem::path& validation_input) {
  std::vector<DocumentInput> out;
  auto add = [&](const std::filesystem::path& path, std::size_t plan_file) {
    out.emplace_back();
    out.back().path = out.back().read_path = path;
    out.back().index = out.size() - 1;
    out.back().plan_file = plan_file;
  };
  for (const auto& path : inputs) add(path, 0);
  if (!validation_input.empty()) add(validation_input, 1);
  return out;
}

void read_on_every_rank(DocumentInput& input, dist::Comm& comm, const std::string& command,
                        const std::function<std::optional<BadRow>(DocumentInput&)>& read_range) {
  std::optional<BadRow> bad;
  on_every_rank(comm, fmt::format("{}: reading '{}'", command, input.path.string()), [&] {
    input.range = input_range(input.read_path, comm);
    bad = read_range(input);
  });
  const auto rows = comm.allgather_value<int64_t>(static_cast<int64_t>(input.local_valid.size()));
  for (int r = 0; r < comm.world_size(); ++r) (r < comm.rank() ? input.first_row : input.rows) += rows[r];
  input.rows += input.first_row;
  on_every_rank(comm, fmt::format("{}: checking the rows of '{}'", command, input.path.string()), [&] {
    if (bad) {
      bad->row += input.first_row;
      fail("{}", bad_row_message(input.path, *bad));
    }
  });
}

std::vector<std::vector<uint8_t>> gather_documents(std::vector<DocumentInput>& inputs, dist::Comm& comm) {
  std::vector<std::vector<uint8_t>> valid(inputs.back().plan_file + 1);
  for (auto& input : inputs) {
    auto& file = valid[input.plan_file];
    input.plan_first = static_cast<int64_t>(file.size());
    file.resize(file.size() + static_cast<std::size_t>(input.rows));
    std::copy(input.local_valid.begin(), input.local_valid.end(), file.begin() + input.plan_first + input.first_row);
    const auto rows = comm.allgather_value<int64_t>(static_cast<int64_t>(input.local_valid.size()));
    int64_t first = input.plan_first;
    for (int r = 0; r < comm.world_size(); ++r) {
      comm.broadcast(file.data() + first, static_cast<std::size_t>(rows[r]), r);
      first += rows[r];
    }
  }
  return valid;
}

std::vector<std::vector<uint32_t>> lengths_per_split(const std::vector<DocumentInput>& inputs, const LmPlan& plan,
                                                     dist::Comm& comm) {
  std::vector<std::vector<uint32_t>> lengths(plan.documents.names.size());
  for (const auto& input : inputs) {
    const auto counts = comm.allgather_value<int64_t>(static_cast<int64_t>(input.local_lengths.size()));
    std::vector<uint32_t> all;
    for (int r = 0; r < comm.world_size(); ++r) {
      const std::size_t first = all.size();
      all.resize(first + static_cast<std::size_t>(counts[r]));
      if (r == comm.rank()) std::copy(input.local_lengths.begin(), input.local_lengths.end(), all.begin() + first);
      comm.broadcast(all.data() + first, static_cast<std::size_t>(counts[r]) * sizeof(uint32_t), r);
    }
    const auto& split = plan.documents.files[input.plan_file].split;
    std::size_t document = 0;
    for (int64_t row = 0; row < input.rows; ++row) {
      const uint8_t s = split[static_cast<std::size_t>(input.plan_first + row)];
      if (s != kSkipped) lengths[s].push_back(all[document++]);
    }
    HPCTRAIN_CHECK(document == all.size(), "internal error: '{}' has {} documents but {} lengths", input.path.string(),
                   document, all.size());
  }
  return lengths;
}

int64_t write_planned_split(data::DatasetWriter& writer, const LmPlan& plan, std::size_t s,
                            const std::filesystem::path& stem, int64_t rows_per_bucket, bool loss_mask, bool progress) {
  const bool joined = !plan.segment_position.empty();
  const int64_t records = plan.bucket_records()[s];
  ProgressBar bar(fmt::format("writing {}", plan.documents.names[s]), records, joined ? "segments" : "rows", progress);
  writer.begin_text_split(plan.documents.names[s], /*has_pairs=*/false, /*has_document_starts=*/joined, loss_mask);
  static const std::vector<uint32_t> kNoRows;
  RowJoiner joiner(joined ? plan.row_segments[s] : kNoRows);
  int64_t tokens = 0;
  for (int64_t b = 0; b * rows_per_bucket < records; ++b) {
    const int64_t count = std::min(rows_per_bucket, records - b * rows_per_bucket);
    auto rows = read_bucket(stem, 1, s, b, rows_per_bucket, count, /*pairs=*/false, loss_mask);
    if (joined) rows = joiner.join(rows);
    writer.append_text(rows);
    tokens += rows.num_tokens();
    bar.update(b * rows_per_bucket + count);
  }
  HPCTRAIN_CHECK(!joined || joiner.done(), "internal error: split {} was planned with {} rows, {} were joined", s,
                 plan.rows[s], joiner.rows());
  writer.end_split();
  bar.finish();
  return tokens;
}

TokenStreamWriter::TokenStreamWriter(std::filesystem::path path, bool with_mask)
    : path_(std::move(path)), with_mask_(with_mask) {
  file_ = std::fopen(path_.c_str(), "wb");
  HPCTRAIN_CHECK(file_ != nullptr, "cannot write the temporary '{}': {}", path_.string(), std::strerror(errno));
}

TokenStreamWriter::~TokenStreamWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void TokenStreamWriter::write_ids(const std::vector<int32_t>& ids) {
  const auto count = static_cast<uint32_t>(ids.size());
  const bool ok = std::fwrite(&count, sizeof count, 1, file_) == 1 &&
                  std::fwrite(ids.data(), sizeof(int32_t), ids.size(), file_) == ids.size();
  HPCTRAIN_CHECK(ok, "cannot write {} tokens to the temporary '{}': {}", ids.size(), path_.string(), std::strerror(errno));
}

void TokenStreamWriter::write(const std::vector<int32_t>& ids) {
  HPCTRAIN_CHECK(!with_mask_, "internal error: a document without its loss mask in '{}'", path_.string());
  write_ids(ids);
}

void TokenStreamWriter::write(const std::vector<int32_t>& ids, const std::vector<uint8_t>& mask) {
  HPCTRAIN_CHECK(with_mask_ && mask.size() == ids.size(), "internal error: {} mask bytes for {} ids in '{}'", mask.size(),
                 ids.size(), path_.string());
  write_ids(ids);
  HPCTRAIN_CHECK(std::fwrite(mask.data(), 1, mask.size(), file_) == mask.size(),
                 "cannot write {} mask bytes to the temporary '{}': {}", mask.size(), path_.string(), std::strerror(errno));
}

void TokenStreamWriter::close() {
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  HPCTRAIN_CHECK(closed, "cannot write the temporary '{}': {}", path_.string(), std::strerror(errno));
}

TokenStreamReader::TokenStreamReader(std::vector<std::filesystem::path> paths, bool with_mask)
    : paths_(std::move(paths)), with_mask_(with_mask) {}

TokenStreamReader::~TokenStreamReader() {
  if (file_ != nullptr) std::fclose(file_);
}

bool TokenStreamReader::open_next() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
    std::error_code ignored;
    std::filesystem::remove(paths_[next_path_ - 1], ignored);
  }
  if (next_path_ == paths_.size()) return false;
  const auto& path = paths_[next_path_++];
  file_ = std::fopen(path.c_str(), "rb");
  HPCTRAIN_CHECK(file_ != nullptr,
                 "cannot read the temporary '{}': {}; with several ranks the output's folder must be on a file system "
                 "that every rank sees", path.string(), std::strerror(errno));
  return true;
}

bool TokenStreamReader::next(std::vector<int32_t>& ids, std::vector<uint8_t>& mask) {
  HPCTRAIN_CHECK(with_mask_, "internal error: reading a loss mask from a stream without one");
  if (!next_ids(ids)) return false;
  mask.resize(ids.size());
  HPCTRAIN_CHECK(std::fread(mask.data(), 1, mask.size(), file_) == mask.size(),
                 "internal error: the temporary '{}' ends inside a loss mask", paths_[next_path_ - 1].string());
  return true;
}

bool TokenStreamReader::next(std::vector<int32_t>& ids) {
  HPCTRAIN_CHECK(!with_mask_, "internal error: a stream with a loss mask read without it");
  return next_ids(ids);
}

bool TokenStreamReader::next_ids(std::vector<int32_t>& ids) {
  uint32_t count = 0;
  while (file_ == nullptr || std::fread(&count, sizeof count, 1, file_) != 1) {
    if (!open_next()) return false;
  }
  ids.resize(count);
  HPCTRAIN_CHECK(std::fread(ids.data(), sizeof(int32_t), count, file_) == count,
                 "internal error: the temporary '{}' ends inside a document", paths_[next_path_ - 1].string());
  return true;
}

}  // namespace hpctrain::prep::detail
