#include "hpctrain/prep/text_prep.hpp"

#include <algorithm>
#include <fmt/ranges.h>
#include <atomic>
#include <mutex>
#include <chrono>
#include <cmath>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/data/text_records.hpp"
#include "hpctrain/prep/labels.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"
#include "hpctrain/tokenize/utf8.hpp"

namespace hpctrain::prep {
namespace {

// One valid input row, before tokenization.
struct RawExample {
  std::string text;
  std::string pair;
  std::string label;
  int64_t source_index = 0;
  bool replaced_invalid_utf8 = false;  // JSONL: the reader already replaced invalid UTF-8 by U+FFFD
};

struct RawSplit {
  std::string name;
  std::vector<RawExample> rows;
};

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; });
}

// Reads and checks every row of one input file. A bad row throws (naming file, line, reason) or,
// with skip_invalid, is counted in `skipped` by reason.
class RowReader {
 public:
  RowReader(const TextPrepOptions& options, TextPrepReport& report)
      : options_(options), report_(report), forced_(options.labels.begin(), options.labels.end()) {}

  std::vector<RawExample> read(const std::filesystem::path& path) {
    std::vector<std::string> fields = {options_.text_field, options_.label_field};
    if (!options_.text_pair_field.empty()) fields.push_back(options_.text_pair_field);
    data::TextRecordReader reader(path, data::text_format_from_path(path), fields);
    ProgressBar bar(fmt::format("reading {}", path.filename().string()), 0, "rows", options_.progress);
    std::vector<RawExample> rows;
    data::TextRecord record;
    while (reader.next(record)) {
      if (auto example = check(path, record)) rows.push_back(std::move(*example));
      if ((record.row & 1023) == 0) bar.update(record.row + 1, reader.bytes_consumed(), reader.file_size());
    }
    bar.update(static_cast<int64_t>(rows.size()), reader.bytes_consumed(), reader.file_size());
    bar.finish();
    report_.input_bytes += static_cast<int64_t>(reader.file_size());
    return rows;
  }

 private:
  std::optional<RawExample> check(const std::filesystem::path& path, data::TextRecord& record) {
    if (!record.error.empty()) return reject(path, record, "malformed row", record.error);
    const std::string* field_names[3] = {&options_.text_field, &options_.label_field, &options_.text_pair_field};
    for (std::size_t i = 0; i < record.fields.size(); ++i) {
      if (!record.fields[i]) return reject(path, record, "missing field", fmt::format("missing field '{}'", *field_names[i]));
    }
    RawExample example;
    example.text = std::move(*record.fields[0]);
    example.label = std::move(*record.fields[1]);
    if (record.fields.size() > 2) example.pair = std::move(*record.fields[2]);
    example.source_index = record.row;
    example.replaced_invalid_utf8 = record.replaced_invalid_utf8;
    if (is_blank(example.text)) return reject(path, record, "empty text", fmt::format("empty text in field '{}'", options_.text_field));
    if (record.fields.size() > 2 && is_blank(example.pair))
      return reject(path, record, "empty text", fmt::format("empty text in field '{}'", options_.text_pair_field));
    if (example.label.empty()) return reject(path, record, "missing field", fmt::format("empty label in field '{}'", options_.label_field));
    if (!forced_.empty() && forced_.count(example.label) == 0)
      return reject(path, record, "label not in --labels",
                    fmt::format("label '{}' is not in --labels ({})", example.label, fmt::join(options_.labels, ",")));
    return example;
  }

  std::nullopt_t reject(const std::filesystem::path& path, const data::TextRecord& record, const std::string& reason,
                        const std::string& detail) {
    if (!options_.skip_invalid)
      fail("{}: line {} (row {}): {}\n  hint: fix the row, or pass --skip-invalid to skip bad rows and count them by reason",
           path.string(), record.line, record.row, detail);
    ++report_.skipped[reason];
    return std::nullopt;
  }

  const TextPrepOptions& options_;
  TextPrepReport& report_;
  const std::set<std::string> forced_;
};

// Stratified split: for each label, a seeded shuffle of its rows; the first round(fraction × count) go to validation.
// Rows keep their input order within each split (the write shuffle comes later).
std::pair<std::vector<RawExample>, std::vector<RawExample>> stratified_split(std::vector<RawExample> rows,
                                                                            const LabelMap& labels, double fraction,
                                                                            uint64_t seed) {
  std::vector<std::vector<std::size_t>> by_label(labels.size());
  for (std::size_t i = 0; i < rows.size(); ++i) by_label[labels.id(rows[i].label)].push_back(i);
  std::vector<char> to_validation(rows.size(), 0);
  for (std::size_t label = 0; label < by_label.size(); ++label) {
    auto& members = by_label[label];
    shuffle(members, derive_seed(seed, 1, label));
    const auto count = static_cast<std::size_t>(std::llround(fraction * static_cast<double>(members.size())));
    for (std::size_t k = 0; k < count; ++k) to_validation[members[k]] = 1;
  }
  std::vector<RawExample> train, validation;
  for (std::size_t i = 0; i < rows.size(); ++i) (to_validation[i] ? validation : train).push_back(std::move(rows[i]));
  return {std::move(train), std::move(validation)};
}

// Tokenizes a split on `threads` threads in chunks; the result keeps the rows' order.
data::TextExamples tokenize_split(const RawSplit& split, const tokenize::BertTokenizer& tokenizer, const LabelMap& labels,
                                  int max_length, bool pairs, int threads, bool progress, TextPrepReport& report) {
  constexpr std::size_t kChunk = 512;
  const std::size_t n = split.rows.size();
  const std::size_t chunks = (n + kChunk - 1) / kChunk;
  struct Piece {
    std::vector<int32_t> ids;
    std::vector<uint8_t> types;
    std::vector<int64_t> lengths;
    int64_t invalid_utf8 = 0, truncated = 0;
  };
  std::vector<Piece> pieces(chunks);
  std::atomic<std::size_t> next_chunk{0}, rows_done{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    tokenize::Encoding encoding;
    try {
      for (std::size_t c; (c = next_chunk.fetch_add(1)) < chunks;) {
        Piece& piece = pieces[c];
        for (std::size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
          const RawExample& row = split.rows[i];
          // The tokenizer reads invalid UTF-8 as U+FFFD (then drops it); here we only count such rows.
          const bool valid = tokenize::utf8::is_valid(row.text) && (!pairs || tokenize::utf8::is_valid(row.pair));
          piece.invalid_utf8 += valid && !row.replaced_invalid_utf8 ? 0 : 1;
          tokenizer.encode_into(row.text, pairs ? std::optional<std::string_view>(row.pair) : std::nullopt, max_length,
                                encoding);
          piece.truncated += encoding.truncated ? 1 : 0;
          piece.ids.insert(piece.ids.end(), encoding.input_ids.begin(), encoding.input_ids.end());
          if (pairs) piece.types.insert(piece.types.end(), encoding.token_type_ids.begin(), encoding.token_type_ids.end());
          piece.lengths.push_back(static_cast<int64_t>(encoding.input_ids.size()));
        }
        rows_done += std::min(n, (c + 1) * kChunk) - c * kChunk;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next_chunk = chunks;
    }
  };
  ProgressBar bar(fmt::format("tokenizing {}", split.name), static_cast<int64_t>(n), "rows", progress);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
  bar.update(static_cast<int64_t>(rows_done.load()));
  bar.finish();

  data::TextExamples out;
  out.offsets.assign(1, 0);
  for (auto& piece : pieces) {
    out.input_ids.insert(out.input_ids.end(), piece.ids.begin(), piece.ids.end());
    out.token_type_ids.insert(out.token_type_ids.end(), piece.types.begin(), piece.types.end());
    for (int64_t length : piece.lengths) out.offsets.push_back(out.offsets.back() + length);
    report.rows_with_invalid_utf8 += piece.invalid_utf8;
    report.truncated += piece.truncated;
  }
  for (const RawExample& row : split.rows) {
    out.labels.push_back(labels.id(row.label));
    out.source_index.push_back(row.source_index);
  }
  return out;
}

SplitSummary summarize(const std::string& name, const data::TextExamples& examples, std::size_t num_labels) {
  SplitSummary summary{name, static_cast<int64_t>(examples.labels.size()), static_cast<int64_t>(examples.input_ids.size()),
                       std::vector<int64_t>(num_labels, 0)};
  for (int64_t label : examples.labels) ++summary.label_counts[static_cast<std::size_t>(label)];
  return summary;
}

void check_options(const TextPrepOptions& options) {
  HPCTRAIN_CHECK(!options.input.empty(), "--input is required");
  HPCTRAIN_CHECK(!options.output.empty(), "--output is required");
  HPCTRAIN_CHECK(!options.tokenizer_dir.empty(), "--tokenizer is required (a Hugging Face model folder with vocab.txt or tokenizer.json)");
  HPCTRAIN_CHECK(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0,
                 "--validation-fraction must be in [0, 1), got {}", options.validation_fraction);
  HPCTRAIN_CHECK(options.validation_input.empty() || options.validation_fraction == 0.0,
                 "--validation-input and --validation-fraction exclude each other");
  HPCTRAIN_CHECK(options.max_length == 0 || options.max_length >= (options.text_pair_field.empty() ? 2 : 3),
                 "--max-length {} leaves no room for the special tokens", options.max_length);
  for (const auto& path : {options.input, options.validation_input, options.test_input}) {
    if (!path.empty()) HPCTRAIN_CHECK(std::filesystem::is_regular_file(path), "input file '{}' does not exist", path.string());
  }
}

}  // namespace

TextPrepReport prep_text(const TextPrepOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  check_options(options);
  TextPrepReport report;
  const auto tokenizer = tokenize::BertTokenizer::from_pretrained(options.tokenizer_dir);
  report.max_length = options.max_length > 0 ? options.max_length
                                             : static_cast<int>(std::min<int64_t>(tokenizer.config().model_max_length, 512));

  // Read and check every input before any output exists.
  RowReader reader(options, report);
  std::vector<RawSplit> splits;
  splits.push_back({"train", reader.read(options.input)});
  if (!options.validation_input.empty()) splits.push_back({"validation", reader.read(options.validation_input)});
  if (!options.test_input.empty()) splits.push_back({"test", reader.read(options.test_input)});
  std::vector<std::string> seen;
  for (const auto& split : splits)
    for (const auto& row : split.rows) seen.push_back(row.label);
  const LabelMap labels = options.labels.empty() ? LabelMap::from_values(seen) : LabelMap(options.labels);
  if (options.validation_fraction > 0.0) {
    auto [train, validation] = stratified_split(std::move(splits[0].rows), labels, options.validation_fraction, options.seed);
    splits[0].rows = std::move(train);
    splits.insert(splits.begin() + 1, RawSplit{"validation", std::move(validation)});
  }
  int64_t skipped = 0;
  for (const auto& [reason, count] : report.skipped) skipped += count;
  for (const auto& split : splits)
    HPCTRAIN_CHECK(!split.rows.empty(), "split '{}' has no examples ({} input rows were skipped as invalid)", split.name, skipped);

  // Shuffle once (seeded) so that contiguous shards are i.i.d.
  for (std::size_t s = 0; s < splits.size(); ++s) shuffle(splits[s].rows, derive_seed(options.seed, 2, s));

  data::FileAttributes attributes;
  attributes.task = data::Task::text_classification;
  attributes.label_names = labels.names();
  attributes.source = options.input.filename().string();
  attributes.created_by = options.created_by;
  attributes.tokenizer = tokenizer.describe();
  attributes.tokenizer["max_length"] = report.max_length;
  data::WriterOptions writer_options;
  writer_options.compression = options.compression;
  data::DatasetWriter writer(options.output, attributes, writer_options, options.overwrite);

  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const bool pairs = !options.text_pair_field.empty();
  for (const auto& split : splits) {
    const auto examples = tokenize_split(split, tokenizer, labels, report.max_length, pairs, threads, options.progress, report);
    writer.write_text_split(split.name, examples, pairs);
    report.splits.push_back(summarize(split.name, examples, labels.size()));
  }
  writer.commit();
  report.label_names = labels.names();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace hpctrain::prep
