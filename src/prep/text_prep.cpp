// `prep text` at corpus scale: two passes over each input (labels, then tokens) by every rank over its own
// byte range, an external shuffle through bucket files, and rank 0 writing the one HDF5 file.
//
// Note [Prep at corpus scale]
// Pass 1: every rank reads its part of each input (Note [Record ranges]), checks every row and keeps only a
// label id per row. The ranks agree on the first bad row (the lowest rank's is the earliest in the file), the
// label set and every row's label; then every rank computes the same SplitPlan (split and position of each
// row, Note [Same order as the in-memory prep]). Pass 2: every rank reads its part again, tokenizes it in
// blocks on all its threads and appends each example to the bucket file of its position (Note [Bucket
// files]). Then rank 0 reads the buckets in order and writes them. Memory: the plan (13 bytes per row), one
// block of rows and one bucket of examples, sized from --memory-mb; the output does not depend on the ranks,
// threads or --memory-mb.
//
// Note [Same order as the in-memory prep]
// Up to 0.x prep read every row into memory, split each label's rows with shuffle(derive_seed(seed, 1, label))
// and shuffled each split with shuffle(derive_seed(seed, 2, s)). The plan replays the same permutations on
// row ordinals (a Fisher–Yates shuffle depends only on the count and the seed), so files prepared before
// and after are identical and their dataset identity does not change.
#include "hpctrain/prep/text_prep.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/core/span.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/prep/labels.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"
#include "prep_common.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep {
namespace {
using namespace detail;

struct Input {
  std::filesystem::path path;
  std::filesystem::path read_path;  // what is read: path, or its decompressed temporary (Note [Splitting a gzip input])
  std::string split;
  data::TextReaderOptions range;
  int64_t first_row = 0;  // rows of the ranks before this one
  int64_t rows = 0;       // of every rank
  std::vector<int32_t> local_labels;  // pass 1: ids into label_names, -1 for a rejected row
  std::vector<std::string> label_names;
};

data::TextRecordReader open_range(const Input& input, const RowChecker& checker) {
  data::TextReaderOptions options = input.range;
  options.display_path = input.path;
  return data::TextRecordReader(input.read_path, data::text_format_from_path(input.path), checker.field_names(), options);
}

// Note [Splitting a gzip input]
// A gzip stream can only be read from its start, so with several ranks rank 0 first writes the input's
// decompressed content to a temporary next to the output, and every rank then reads its byte range of that
// file (Note [Record ranges]). Messages still name the input: its lines are the temporary's lines. The
// temporary goes once the rows are tokenized, and on failure. One process reads the gzip file itself.
// (decompress_for_ranks in prep_common.cpp; `prep lm` does the same.)

// Pass 1 over this rank's range: a label id per row, up to the first bad row.
std::optional<BadRow> scan_labels(Input& input, const RowChecker& checker, TextPrepReport& report, bool progress) {
  auto reader = open_range(input, checker);
  ProgressBar bar(fmt::format("reading {}", input.path.filename().string()), 0, "rows", progress);
  std::unordered_map<std::string, int32_t> ids;
  std::optional<BadRow> bad;
  data::TextRecord record;
  while (!bad && reader.next(record)) {
    auto example = checker.check(record, report.skipped, bad);
    int32_t id = -1;
    if (example) {
      id = ids.emplace(example->label, static_cast<int32_t>(ids.size())).first->second;
      if (id == static_cast<int32_t>(input.label_names.size())) input.label_names.push_back(example->label);
    }
    input.local_labels.push_back(id);
    if ((record.row & 1023) == 0) bar.update(record.row + 1, reader.bytes_consumed(), reader.file_size());
  }
  bar.finish();
  report.input_bytes += static_cast<int64_t>(std::filesystem::file_size(input.path));
  return bad;
}

// Pass 1 on every rank, then agreement on the first bad row (named with its row in the whole file).
void read_labels(Input& input, const RowChecker& checker, TextPrepReport& report, dist::Comm& comm, bool progress) {
  std::optional<BadRow> bad;
  on_every_rank(comm, fmt::format("prep text: reading '{}'", input.path.string()), [&] {
    input.range = input_range(input.read_path, comm);
    bad = scan_labels(input, checker, report, progress);
  });
  const auto rows = comm.allgather_value<int64_t>(static_cast<int64_t>(input.local_labels.size()));
  for (int r = 0; r < comm.world_size(); ++r) (r < comm.rank() ? input.first_row : input.rows) += rows[r];
  input.rows += input.first_row;
  on_every_rank(comm, fmt::format("prep text: checking the rows of '{}'", input.path.string()), [&] {
    if (bad) {
      bad->row += input.first_row;
      fail("{}", bad_row_message(input.path, *bad));
    }
  });
}

// The inputs named with their rows, for an error: "'a.jsonl' (0 rows)", joined by ", ".
std::string rows_of(const std::vector<Input>& inputs) {
  std::vector<std::string> parts;
  for (const auto& input : inputs) parts.push_back(fmt::format("'{}' ({} rows)", input.path.string(), input.rows));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Inputs without a single row are an error naming them (rather than an empty label set later). Every rank
// knows every input's rows, so every rank throws alike.
void check_some_rows(const std::vector<Input>& inputs) {
  int64_t rows = 0;
  for (const auto& input : inputs) rows += input.rows;
  HPCTRAIN_CHECK(rows > 0, "prep text: {} no rows to prepare: {}",
                 inputs.size() == 1 ? "the input has" : "the inputs have", rows_of(inputs));
}

// The label set: --labels, or the sorted unique labels of every rank's rows.
LabelMap agree_labels(const std::vector<Input>& inputs, const TextPrepOptions& options, dist::Comm& comm) {
  if (!options.labels.empty()) return LabelMap(options.labels);
  std::vector<std::string> seen;
  for (int r = 0; r < comm.world_size(); ++r) {
    std::string packed;
    if (r == comm.rank())
      for (const auto& input : inputs)
        for (const auto& name : input.label_names) packed += fmt::format("{}:{}", name.size(), name);
    comm.broadcast_string(packed, r);
    for (std::size_t at = 0; at < packed.size();) {
      const std::size_t colon = packed.find(':', at);
      const std::size_t size = std::stoull(packed.substr(at, colon - at));
      seen.push_back(packed.substr(colon + 1, size));
      at = colon + 1 + size;
    }
  }
  // Every rank has the same `seen`: all throw alike.
  HPCTRAIN_CHECK(!seen.empty(), "prep text: no labels: every row of {} was skipped as invalid (--skip-invalid)",
                 rows_of(inputs));
  return LabelMap::from_values(seen);
}

// Every row's label id in the whole file, on every rank (each rank's part broadcast by it).
std::vector<int32_t> gather_labels(const Input& input, const LabelMap& labels, dist::Comm& comm) {
  std::vector<int32_t> all(static_cast<std::size_t>(input.rows));
  for (std::size_t i = 0; i < input.local_labels.size(); ++i) {
    const int32_t local = input.local_labels[i];
    all[static_cast<std::size_t>(input.first_row) + i] = local < 0 ? -1 : static_cast<int32_t>(labels.id(input.label_names[local]));
  }
  const auto rows = comm.allgather_value<int64_t>(static_cast<int64_t>(input.local_labels.size()));
  int64_t first = 0;
  for (int r = 0; r < comm.world_size(); ++r) {
    comm.broadcast(all.data() + first, static_cast<std::size_t>(rows[r]) * sizeof(int32_t), r);
    first += rows[r];
  }
  return all;
}


Budget plan_budget(const TextPrepOptions& options, int64_t rows, int max_length, std::size_t buckets_hint) {
  const int64_t total = static_cast<int64_t>(options.memory_mb) << 20;
  const int64_t plan_bytes = rows * 13;
  const int64_t data = total - plan_bytes;
  HPCTRAIN_CHECK(data >= (int64_t{1} << 20),
                 "--memory-mb {} is too small for {} rows: the split plan alone needs {} MiB (13 bytes per row), and at "
                 "least 1 MiB more is needed for the rows and tokens",
                 options.memory_mb, rows, (plan_bytes >> 20) + 1);
  Budget budget;
  budget.block_bytes = static_cast<std::size_t>(data / 16);  // raw text; its strings and tokens take about 4x
  const int64_t worst_example = static_cast<int64_t>(max_length) * (options.text_pair_field.empty() ? 4 : 5) + 64;
  budget.rows_per_bucket = std::max<int64_t>(1, data / 2 / (2 * worst_example));  // the file's bytes + the examples
  budget.buffer_bytes = std::max<std::size_t>(4096, static_cast<std::size_t>(data / 8) / std::max<std::size_t>(1, buckets_hint));
  return budget;
}

std::size_t count_buckets(const SplitPlan& plan, int64_t rows_per_bucket) {
  std::size_t buckets = 0;
  for (int64_t size : plan.sizes) buckets += static_cast<std::size_t>((size + rows_per_bucket - 1) / rows_per_bucket);
  return buckets;
}

// Every rank's labels gathered, then the same plan on every rank; a split without examples is an error.
SplitPlan plan_rows(std::vector<Input>& inputs, const LabelMap& labels, const TextPrepOptions& options,
                    const TextPrepReport& report, dist::Comm& comm) {
  std::vector<std::vector<int32_t>> row_labels;
  std::vector<std::string> file_splits;
  for (auto& input : inputs) {
    row_labels.push_back(gather_labels(input, labels, comm));
    file_splits.push_back(input.split);
    std::vector<int32_t>().swap(input.local_labels);
  }
  int64_t skipped = 0;
  for (const auto& [reason, count] : report.skipped) skipped += count;
  skipped = comm.allreduce_value(skipped);
  SplitPlan plan;
  on_every_rank(comm, "prep text: planning the splits", [&] {
    plan = plan_splits(std::move(row_labels), file_splits, labels.size(), options.validation_fraction, options.seed);
    for (std::size_t s = 0; s < plan.names.size(); ++s)
      HPCTRAIN_CHECK(plan.sizes[s] > 0, "split '{}' has no examples ({} input rows were skipped as invalid)", plan.names[s],
                     skipped);
  });
  return plan;
}

Budget budget_for(const SplitPlan& plan, const std::vector<Input>& inputs, const TextPrepOptions& options,
                  int max_length, dist::Comm& comm) {
  int64_t rows = 0;
  for (const auto& input : inputs) rows += input.rows;
  Budget budget;
  on_every_rank(comm, "prep text: sizing the buckets", [&] {
    budget = plan_budget(options, rows, max_length, 1);
    budget = plan_budget(options, rows, max_length, count_buckets(plan, budget.rows_per_bucket));
  });
  return budget;
}

struct Tokenizing {
  const tokenize::BertTokenizer& tokenizer;
  int max_length;
  bool pairs;
  int threads;
  std::size_t block_bytes;
};

// Tokenizes a block of rows and routes each example to its bucket.
void route_block(std::vector<RawExample>& block, std::vector<std::pair<uint8_t, uint32_t>>& places,
                 const LabelMap& labels, const Tokenizing& how, BucketWriter& buckets, TokenizeCounts& counts) {
  std::vector<int64_t> ids;
  for (const auto& row : block) ids.push_back(labels.id(row.label));
  const auto examples = tokenize_rows(block, ids, how.tokenizer, how.max_length, how.pairs, how.threads, counts);
  for (std::size_t i = 0; i < block.size(); ++i) buckets.add(places[i].first, places[i].second, examples, static_cast<int64_t>(i));
  block.clear();
  places.clear();
}

// Pass 2 over this rank's range: rows in blocks of about block_bytes, tokenized, into the buckets.
void tokenize_input(const Input& input, const FileRows& rows, const RowChecker& checker, const LabelMap& labels,
                    const Tokenizing& how, BucketWriter& buckets, TokenizeCounts& counts, bool progress) {
  auto reader = open_range(input, checker);
  ProgressBar bar(fmt::format("tokenizing {}", input.path.filename().string()), 0, "rows", progress);
  std::vector<RawExample> block;
  std::vector<std::pair<uint8_t, uint32_t>> places;
  std::size_t block_bytes = 0;
  std::map<std::string, int64_t> ignored;
  std::optional<BadRow> bad;
  data::TextRecord record;
  while (reader.next(record)) {
    const auto row = static_cast<std::size_t>(input.first_row + record.row);
    if (rows.split[row] == kSkipped) continue;
    auto example = checker.check(record, ignored, bad);
    HPCTRAIN_CHECK(example.has_value(), "internal error: {} row {} was valid in the first pass", input.path.string(), row);
    example->source_index = static_cast<int64_t>(row);
    block_bytes += example->text.size() + example->pair.size() + example->label.size() + 64;
    block.push_back(std::move(*example));
    places.emplace_back(rows.split[row], rows.position[row]);
    if (block_bytes < how.block_bytes) continue;
    route_block(block, places, labels, how, buckets, counts);
    block_bytes = 0;
    bar.update(record.row + 1, reader.bytes_consumed(), reader.file_size());
  }
  route_block(block, places, labels, how, buckets, counts);
  bar.finish();
}

// Rank 0: every split, bucket after bucket, into the HDF5 file.
// The other ranks only wait meanwhile, so the chunks are compressed on the node's threads: `threads`; their
// queue takes the memory that pass 2's block of rows had (Budget::block_bytes).
void write_file(const TextPrepOptions& options, const data::FileAttributes& attributes, const SplitPlan& plan,
                const std::filesystem::path& stem, int ranks, const Budget& budget, int threads, TextPrepReport& report) {
  const int64_t rows_per_bucket = budget.rows_per_bucket;
  data::WriterOptions writer_options;
  writer_options.compression = options.compression;
  writer_options.threads = threads;
  writer_options.queue_bytes = budget.block_bytes;
  data::DatasetWriter writer(options.output, attributes, writer_options, options.overwrite);
  const bool pairs = !options.text_pair_field.empty();
  for (std::size_t s = 0; s < plan.names.size(); ++s) {
    ProgressBar bar(fmt::format("writing {}", plan.names[s]), plan.sizes[s], "rows", options.progress);
    writer.begin_text_split(plan.names[s], pairs);
    SplitSummary summary{plan.names[s], plan.sizes[s], 0, plan.label_counts[s]};
    for (int64_t b = 0; b * rows_per_bucket < plan.sizes[s]; ++b) {
      const int64_t count = std::min(rows_per_bucket, plan.sizes[s] - b * rows_per_bucket);
      const auto examples = read_bucket(stem, ranks, s, b, rows_per_bucket, count, pairs);
      writer.append_text(examples);
      summary.tokens += examples.num_tokens();
      bar.update(b * rows_per_bucket + count);
    }
    writer.end_split();
    bar.finish();
    report.splits.push_back(summary);
  }
  writer.commit();
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
  HPCTRAIN_CHECK(options.memory_mb >= 1 && options.memory_mb <= (1 << 30), "--memory-mb {}: expected 1 to {} MiB",
                 options.memory_mb, 1 << 30);
  for (const auto& path : {options.input, options.validation_input, options.test_input}) {
    if (!path.empty()) HPCTRAIN_CHECK(std::filesystem::is_regular_file(path), "input file '{}' does not exist", path.string());
  }
}

std::vector<Input> inputs_of(const TextPrepOptions& options) {
  std::vector<Input> inputs;
  auto add = [&](const std::filesystem::path& path, const char* split) {
    if (path.empty()) return;
    inputs.emplace_back();
    inputs.back().path = path;
    inputs.back().read_path = path;
    inputs.back().split = split;
  };
  add(options.input, "train");
  add(options.validation_input, "validation");
  add(options.test_input, "test");
  return inputs;
}

data::FileAttributes attributes_of(const TextPrepOptions& options, const LabelMap& labels,
                                   const tokenize::BertTokenizer& tokenizer, int max_length) {
  data::FileAttributes attributes;
  attributes.task = data::Task::text_classification;
  attributes.label_names = labels.names();
  attributes.source = options.input.filename().string();
  attributes.created_by = options.created_by;
  attributes.tokenizer = tokenizer.describe();
  attributes.tokenizer["max_length"] = max_length;
  return attributes;
}

// The counters every rank has for its own rows, summed (all ranks take part).
void sum_over_ranks(TextPrepReport& report, TokenizeCounts& counts, dist::Comm& comm) {
  report.rows_with_invalid_utf8 = counts.invalid_utf8;
  report.truncated = counts.truncated;
  sum_row_counts_over_ranks(report.rows_with_invalid_utf8, report.truncated, report.skipped,
                            {"malformed row", "missing field", "empty text", "label not in --labels"}, comm);
}

}  // namespace

TextPrepReport prep_text(const TextPrepOptions& options) { return prep_text(options, *dist::make_single_process_comm()); }

TextPrepReport prep_text(const TextPrepOptions& options, dist::Comm& comm) {
  const auto start = std::chrono::steady_clock::now();
  span::Tally phases;
  span::Span reading("reading", phases);
  const bool main_rank = comm.rank() == 0, progress = options.progress && main_rank;
  std::optional<tokenize::BertTokenizer> tokenizer;
  TextPrepReport report;
  on_every_rank(comm, "prep text: options and tokenizer", [&] {
    check_options(options);
    tokenizer.emplace(tokenize::BertTokenizer::from_pretrained(options.tokenizer_dir));
    // The temporaries (decompressed inputs, bucket files) go next to the output, before the writer makes its folder.
    if (main_rank && options.output.has_parent_path()) std::filesystem::create_directories(options.output.parent_path());
  });
  report.max_length = options.max_length > 0 ? options.max_length
                                             : static_cast<int>(std::min<int64_t>(tokenizer->config().model_max_length, 512));
  const std::filesystem::path stem = temporaries_stem(options.output, comm);
  // A job ended by the collective watchdog (e.g. the network to another node went down) runs no destructor:
  // this rank's temporaries go first (Note [Cleanup before an abort]).
  const dist::AbortCleanup cleanup([stem, output = options.output, rank = comm.rank()] {
    remove_own_temporaries(stem, output, rank);
  });
  // Pass 1: check every row of every input before any output exists.
  const RowChecker checker(options);
  std::vector<Input> inputs = inputs_of(options);
  Temporaries decompressed;
  for (std::size_t f = 0; f < inputs.size(); ++f) {
    const auto format = data::to_string(data::text_format_from_path(inputs[f].path));  // throws alike on every rank
    inputs[f].read_path = decompress_for_ranks(inputs[f].path, fmt::format("{}.input-{}.{}", stem.string(), f, format),
                                               decompressed, comm, "prep text");
    read_labels(inputs[f], checker, report, comm, progress);
  }
  check_some_rows(inputs);
  const LabelMap labels = agree_labels(inputs, options, comm);
  reading.stop();
  span::Span planning("planning", phases);
  const SplitPlan plan = plan_rows(inputs, labels, options, report, comm);
  const Budget budget = budget_for(plan, inputs, options, report.max_length, comm);
  planning.stop();
  // Pass 2: tokenize into the buckets; then rank 0 writes the file.
  span::Span tokenizing("tokenizing", phases);
  BucketWriter buckets(stem, comm.rank(), plan.sizes, budget.rows_per_bucket, budget.buffer_bytes);
  TokenizeCounts counts;
  const Tokenizing how{*tokenizer, report.max_length, !options.text_pair_field.empty(), threads_per_rank(options.threads, "--threads", comm),
                       budget.block_bytes};
  on_every_rank(comm, "prep text: tokenizing", [&] {
    for (std::size_t f = 0; f < inputs.size(); ++f) tokenize_input(inputs[f], plan.files[f], checker, labels, how, buckets, counts, progress);
    buckets.flush();
  });
  decompressed.remove_all();
  sum_over_ranks(report, counts, comm);
  tokenizing.stop();
  span::Span writing("writing", phases);
  on_every_rank(comm, fmt::format("prep text: writing '{}'", options.output.string()), [&] {
    if (main_rank)
      write_file(options, attributes_of(options, labels, *tokenizer, report.max_length), plan, stem, comm.world_size(),
                 budget, how.threads * comm.local_size(), report);
  });
  writing.stop();
  for (const char* phase : {"reading", "planning", "tokenizing", "writing"}) report.phases.emplace_back(phase, phases.seconds(phase));
  report.label_names = labels.names();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace hpctrain::prep
