// `prep lm` at corpus scale, as `prep text` (Note [Prep at corpus scale] in text_prep.cpp): every rank reads and
// tokenizes its byte range of each input, rank 0 packs the documents into rows and writes the one HDF5 file.
//
// Note [Token streams]
// Pass 1: every rank reads its part of each input (Note [Record ranges]), checks every row, tokenizes the
// documents in blocks on all its threads and appends their ids to its token stream of that input
// ("STEM.rRANK.iINPUT.tokens", next to the output); it keeps one flag per row (a document or a rejected row) and
// each document's length. The ranks agree on the first bad row, then every rank computes the same plan from the
// flags (the seeded split of the documents) and the ranks sum the documents' tokens per split: so the number of
// rows and their shuffled positions are known before any row is cut (LmPlan). Pass 2, on rank 0: the streams are
// read in input order (rank 0's part of an input, then rank 1's, ...), so the documents come in their order in
// the inputs whatever the ranks; each split's documents are packed into rows (Note [Packing rows]) and every row
// goes to the bucket file of its position (Note [Bucket files]); then the buckets are written in order. With bfd and
// bfd_split the ranks also share every document's length, so that each computes the rows of whole documents
// (Note [Best-fit-decreasing rows]); pass 2 then sends each segment (a document, or a piece of one) to the bucket of
// its place among the split's segments in row order, and the rows are put together from consecutive segments as the
// buckets are written. Memory: the plan (about 13 bytes per document and 4 per row; bfd adds 4 per document, 8 per
// segment and 4 per row, and about 20 per segment while planning), one block of documents, one bucket of rows (or
// segments), from --memory-mb; the output does not depend on the ranks, threads or --memory-mb.
#include "hpctrain/prep/lm_prep.hpp"

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/core/span.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "lm_documents.hpp"
#include "lm_packing.hpp"
#include "prep_common.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep {
namespace {
using namespace detail;
namespace fs = std::filesystem;

using LmInput = DocumentInput;  // (lm_documents.hpp)

fs::path stream_path(const fs::path& stem, int rank, std::size_t input) {
  return fmt::format("{}.r{}.i{}.tokens", stem.string(), rank, input);
}


std::size_t pass1_block_bytes(const LmPrepOptions& options) {
  // Raw text; its strings and ids take about 4x (the plan comes later, and is checked then).
  return std::max<std::size_t>(std::size_t{1} << 16, (static_cast<std::size_t>(options.memory_mb) << 20) / 16);
}

Budget plan_budget(const LmPrepOptions& options, const LmPlan& plan, int row_length) {
  int64_t documents = 0, rows = 0, segments = 0, buckets_hint = 0;
  for (const auto& file : plan.documents.files) documents += static_cast<int64_t>(file.split.size());
  for (int64_t count : plan.rows) rows += count;
  for (int64_t count : plan.segments) segments += count;
  const int64_t total = static_cast<int64_t>(options.memory_mb) << 20;
  const int64_t plan_bytes = documents * 13 + rows * 4 + (segments > 0 ? documents * 4 + segments * 8 + rows * 4 : 0);
  const int64_t data = total - plan_bytes;
  HPCTRAIN_CHECK(data >= (int64_t{1} << 20),
                 "--memory-mb {} is too small for {} documents and {} rows: the plan alone needs {} MiB (13 bytes per "
                 "document, 4 per row; bfd and bfd_split 4 more per document, 8 per segment and 4 per row), and at least "
                 "1 MiB more is needed for the documents and rows",
                 options.memory_mb, documents, rows, (plan_bytes >> 20) + 1);
  Budget budget;
  budget.block_bytes = static_cast<std::size_t>(data / 16);
  const int64_t worst_row = static_cast<int64_t>(row_length) * 4 + 64;
  budget.rows_per_bucket = std::max<int64_t>(1, data / 2 / (2 * worst_row));  // the file's bytes + the rows
  for (int64_t count : plan.bucket_records()) buckets_hint += (count + budget.rows_per_bucket - 1) / budget.rows_per_bucket;
  budget.buffer_bytes = std::max<std::size_t>(4096, static_cast<std::size_t>(data / 8 / std::max<int64_t>(1, buckets_hint)));
  return budget;
}

// ---- options and tokenizer ----

void check_options(const LmPrepOptions& options) {
  HPCTRAIN_CHECK(!options.inputs.empty(), "--input is required");
  HPCTRAIN_CHECK(!options.output.empty(), "--output is required");
  HPCTRAIN_CHECK(!options.tokenizer_dir.empty(), "--tokenizer is required (a Hugging Face folder with tokenizer.json)");
  HPCTRAIN_CHECK(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0,
                 "--validation-fraction must be in [0, 1), got {}", options.validation_fraction);
  HPCTRAIN_CHECK(options.validation_input.empty() || options.validation_fraction == 0.0,
                 "--validation-input and --validation-fraction exclude each other");
  // A row of one token predicts nothing (a causal LM predicts each token after the first): 0 or at least 2.
  constexpr int kMostRowTokens = 1 << 24;  // a row's ids are held in memory whole (and a model has fewer positions)
  HPCTRAIN_CHECK(options.block_size == 0 || (options.block_size >= 2 && options.block_size <= kMostRowTokens),
                 "--block-size {}: expected 2 to {} tokens per row (a row of one token predicts nothing), or 0 for the "
                 "default", options.block_size, kMostRowTokens);
  HPCTRAIN_CHECK(options.max_length == 0 || (options.max_length >= 2 && options.max_length <= kMostRowTokens),
                 "--max-length {}: expected 2 to {} tokens per row (a row of one token predicts nothing), or 0 for the "
                 "default", options.max_length, kMostRowTokens);
  const bool wrapped = options.packing == LmPacking::wrapped;
  HPCTRAIN_CHECK(wrapped || options.block_size == 0,
                 "--block-size {} cuts packed rows (--packing wrapped), but --packing {} writes rows of whole documents: "
                 "use --max-length",
                 options.block_size, to_string(options.packing));
  HPCTRAIN_CHECK(!wrapped || options.max_length == 0,
                 "--max-length {} sets the rows of --packing bfd, bfd_split and none; wrapped rows have --block-size "
                 "tokens", options.max_length);
  HPCTRAIN_CHECK(options.memory_mb >= 1 && options.memory_mb <= (1 << 30), "--memory-mb {}: expected 1 to {} MiB",
                 options.memory_mb, 1 << 30);
  std::vector<fs::path> paths = options.inputs;
  if (!options.validation_input.empty()) paths.push_back(options.validation_input);
  for (const auto& path : paths)
    HPCTRAIN_CHECK(fs::is_regular_file(path), "input file '{}' does not exist", path.string());
}

nlohmann::json tokenizer_config(const fs::path& tokenizer_dir) {
  const fs::path path = fs::is_directory(tokenizer_dir) ? tokenizer_dir / "tokenizer_config.json" : fs::path();
  if (path.empty() || !fs::is_regular_file(path)) return nlohmann::json::object();
  std::ifstream in(path);
  auto config = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return config.is_object() ? config : nlohmann::json::object();
}

// Every document ends with EOS: a tokenizer without one is refused.
int32_t eos_of(const tokenize::ByteLevelBpeTokenizer& tokenizer, const LmPrepOptions& options, const nlohmann::json& config) {
  if (const auto eos = tokenizer.eos_id()) return *eos;
  const auto named = config.find("eos_token");
  fail("{}: the tokenizer has no EOS token (tokenizer_config.json's eos_token: {}); prep lm ends every document with "
       "it\n  hint: use the model's tokenizer folder, whose tokenizer_config.json names its eos_token",
       options.tokenizer_dir.string(), named == config.end() ? std::string("absent") : named->dump());
}

// --block-size (wrapped) or --max-length, else run_clm's default: min(1024, model_max_length).
int row_length_of(const LmPrepOptions& options, const nlohmann::json& config) {
  const int chosen = options.packing == LmPacking::wrapped ? options.block_size : options.max_length;
  if (chosen > 0) return chosen;
  const auto limit = config.find("model_max_length");
  if (limit != config.end() && limit->is_number() && limit->get<double>() >= 2.0 && limit->get<double>() < kDefaultBlockSize)
    return static_cast<int>(limit->get<double>());
  return kDefaultBlockSize;
}

data::FileAttributes attributes_of(const LmPrepOptions& options, const tokenize::ByteLevelBpeTokenizer& tokenizer,
                                   int32_t eos, int row_length) {
  data::FileAttributes attributes;
  attributes.task = data::Task::causal_lm;
  std::vector<std::string> names;
  for (const auto& input : options.inputs) names.push_back(input.filename().string());
  attributes.source = fmt::format("{}", fmt::join(names, ","));
  attributes.created_by = options.created_by;
  nlohmann::json described = {{"type", "byte-level-bpe"}, {"vocab_size", tokenizer.vocab_size()}, {"eos_id", eos},
                              {"bos_id", tokenizer.bos_id() ? nlohmann::json(*tokenizer.bos_id()) : nlohmann::json()},
                              {"packing", options.packing == LmPacking::wrapped ? "group" : to_string(options.packing)},
                              {"max_length", row_length}};
  if (options.packing == LmPacking::wrapped) described["block_size"] = row_length;
  for (const auto& file : tokenizer.files())
    if (file.filename() == "tokenizer.json") described["tokenizer_json_sha256"] = sha256_file_hex(file);
  attributes.tokenizer = described;
  return attributes;
}

std::vector<LmInput> inputs_of(const LmPrepOptions& options) {
  return document_inputs(options.inputs, options.validation_input);
}

// ---- pass 1: documents → token streams ----

struct Pass1 {
  const LmPrepOptions& options;
  const DocumentTokenizer& how;
  std::size_t block_bytes;
  fs::path stem;
  bool progress;
};

void flush_documents(std::vector<std::string>& texts, std::vector<uint8_t>& replaced, LmInput& input, const Pass1& pass,
                     TokenStreamWriter& stream, DocumentCounts& counts) {
  for (const auto& ids : tokenize_documents(texts, replaced, pass.how, input.local_lengths, counts)) stream.write(ids);
  texts.clear();
  replaced.clear();
}

// This rank's range of one input, up to the first bad row.
std::optional<BadRow> tokenize_range(LmInput& input, const Pass1& pass, int rank, std::map<std::string, int64_t>& skipped,
                                     DocumentCounts& counts) {
  data::TextReaderOptions reader_options = input.range;
  reader_options.display_path = input.path;
  data::TextRecordReader reader(input.read_path, data::text_format_from_path(input.path), {pass.options.text_field},
                                reader_options);
  TokenStreamWriter stream(stream_path(pass.stem, rank, input.index));
  ProgressBar bar(fmt::format("tokenizing {}", input.path.filename().string()), 0, "rows", pass.progress);
  std::vector<std::string> texts;
  std::vector<uint8_t> replaced;
  std::size_t bytes = 0;
  std::optional<BadRow> bad;
  data::TextRecord record;
  while (!bad && reader.next(record)) {
    auto text = check_document(record, pass.options, skipped, bad);
    input.local_valid.push_back(text ? 1 : 0);
    if (!text) continue;
    bytes += text->size() + 64;
    texts.push_back(std::move(*text));
    replaced.push_back(record.replaced_invalid_utf8 ? 1 : 0);
    if (bytes < pass.block_bytes) continue;
    flush_documents(texts, replaced, input, pass, stream, counts);
    bytes = 0;
    bar.update(record.row + 1, reader.bytes_consumed(), reader.file_size());
  }
  flush_documents(texts, replaced, input, pass, stream, counts);
  stream.close();
  bar.update(static_cast<int64_t>(input.local_valid.size()), reader.bytes_consumed(), reader.file_size());
  bar.finish();
  return bad;
}

// Pass 1 of one input (read_on_every_rank), its token stream owned by `owned` until the end.
void read_input(LmInput& input, const Pass1& pass, Temporaries& owned, dist::Comm& comm,
                std::map<std::string, int64_t>& skipped, DocumentCounts& counts) {
  owned.add(stream_path(pass.stem, comm.rank(), input.index));
  read_on_every_rank(input, comm, "prep lm",
                     [&](LmInput& in) { return tokenize_range(in, pass, comm.rank(), skipped, counts); });
}

// ---- the plan ----

// The documents' tokens per split (before any cut), summed over the ranks.
std::vector<int64_t> tokens_per_split(const std::vector<LmInput>& inputs, const LmPlan& plan, dist::Comm& comm) {
  std::vector<int64_t> tokens(plan.documents.names.size(), 0);
  for (const auto& input : inputs) {
    const auto& split = plan.documents.files[input.plan_file].split;
    std::size_t document = 0;
    for (std::size_t row = 0; row < input.local_valid.size(); ++row) {
      if (!input.local_valid[row]) continue;
      const auto s = split[static_cast<std::size_t>(input.plan_first + input.first_row) + row];
      tokens[s] += input.local_lengths[document++];
    }
  }
  comm.allreduce(tokens.data(), tokens.size());
  return tokens;
}

int64_t skipped_rows(const std::map<std::string, int64_t>& skipped) {
  int64_t total = 0;
  for (const auto& [reason, count] : skipped) total += count;
  return total;
}

// The same plan on every rank; a split without documents or rows is an error.
// The input files for messages: "a.jsonl, b.jsonl (--validation-input v.jsonl)".
std::string input_names(const LmPrepOptions& options) {
  std::vector<std::string> names;
  for (const fs::path& input : options.inputs) names.push_back("'" + input.string() + "'");
  std::string text = fmt::format("{}", fmt::join(names, ", "));
  if (!options.validation_input.empty()) text += fmt::format(" (--validation-input '{}')", options.validation_input.string());
  return text;
}

LmPlan plan_all(std::vector<LmInput>& inputs, const LmPrepOptions& options, int row_length, const LmPrepReport& report,
                std::vector<int64_t>& tokens, dist::Comm& comm) {
  auto valid = gather_documents(inputs, comm);
  const int64_t skipped = comm.allreduce_value(skipped_rows(report.skipped));
  LmPlan plan;
  on_every_rank(comm, "prep lm: planning the splits", [&] {
    plan = plan_documents(valid, options.validation_fraction, options.seed);
    for (std::size_t s = 0; s < plan.documents.names.size(); ++s)
      HPCTRAIN_CHECK(plan.documents.sizes[s] > 0, "prep lm: split '{}' has no documents ({} input rows were skipped as "
                     "invalid); inputs: {}", plan.documents.names[s], skipped, input_names(options));
  });
  tokens = tokens_per_split(inputs, plan, comm);
  std::vector<std::vector<uint32_t>> lengths;
  if (packs_documents(options.packing)) lengths = lengths_per_split(inputs, plan, comm);
  on_every_rank(comm, "prep lm: planning the rows", [&] {
    if (packs_documents(options.packing))
      plan_document_rows(plan, lengths, row_length, options.packing == LmPacking::bfd_split, options.seed);
    else
      plan_rows(plan, tokens, options.packing == LmPacking::wrapped ? row_length : 0, options.seed);
    for (std::size_t s = 0; s < plan.rows.size(); ++s)
      HPCTRAIN_CHECK(plan.rows[s] > 0, "prep lm: split '{}': its {} documents hold {} tokens, fewer than one row of "
                     "--block-size {}; inputs: {}", plan.documents.names[s], plan.documents.sizes[s], tokens[s],
                     row_length, input_names(options));
  });
  return plan;
}

// ---- pass 2 (rank 0): token streams → rows → buckets → the file ----

// Puts one row at its position in the buckets.
void route_row(BucketWriter& buckets, std::size_t split, uint32_t position, const std::vector<int32_t>& ids,
               int64_t source_row) {
  static const std::vector<uint8_t> kNoTypes;
  data::TextExamples row;
  row.append(ids, kNoTypes, data::kNoLabel, source_row);
  buckets.add(split, position, row, 0);
}

// Where pass 2 sends each document: its row (none), the rows cut from the stream (wrapped), or its segments
// (bfd, bfd_split).
struct Router {
  const LmPlan& plan;
  BucketWriter& buckets;
  std::vector<RowPacker> packers;  // wrapped: per split
  std::vector<uint32_t> cut;       // per split: rows cut (wrapped) or segments placed (bfd, bfd_split)
  int64_t capacity = 0;            // bfd, bfd_split: tokens per row
  bool split_long = false;         // bfd_split

  void add(uint8_t s, uint32_t position, const std::vector<int32_t>& ids, int64_t row) {
    if (!packers.empty()) {
      packers[s].add(ids.data(), ids.size(), row, [&](const std::vector<int32_t>& packed, int64_t source_row) {
        route_row(buckets, s, plan.row_position[s][cut[s]++], packed, source_row);
      });
    } else if (!plan.segment_position.empty()) {
      for_each_segment(static_cast<int64_t>(ids.size()), capacity, split_long, [&](int64_t first, int64_t count) {
        const std::vector<int32_t> segment(ids.begin() + first, ids.begin() + first + count);
        route_row(buckets, s, plan.segment_position[s][cut[s]++], segment, row);
      });
    } else {
      route_row(buckets, s, position, ids, row);
    }
  }
  // Every planned row (or segment) was routed.
  void check_done() const {
    const std::vector<int64_t>& planned = plan.segment_position.empty() ? plan.rows : plan.segments;
    for (std::size_t s = 0; s < cut.size() && (!packers.empty() || !plan.segment_position.empty()); ++s)
      HPCTRAIN_CHECK(cut[s] == planned[s], "internal error: split {} was planned with {} rows (or segments), {} were made",
                     s, planned[s], cut[s]);
  }
};

void pack_input(const LmInput& input, const LmPlan& plan, const fs::path& stem, int ranks, Router& router,
                ProgressBar& bar) {
  std::vector<fs::path> streams;
  for (int r = 0; r < ranks; ++r) streams.push_back(stream_path(stem, r, input.index));
  TokenStreamReader reader(std::move(streams));
  const FileRows& documents = plan.documents.files[input.plan_file];
  std::vector<int32_t> ids;
  for (int64_t row = 0; row < input.rows; ++row) {
    const auto at = static_cast<std::size_t>(input.plan_first + row);
    const uint8_t s = documents.split[at];
    if (s == kSkipped) continue;
    HPCTRAIN_CHECK(reader.next(ids), "internal error: the token streams of '{}' end before row {}", input.path.string(), row);
    router.add(s, documents.position[at], ids, row);
    if ((row & 1023) == 0) bar.update(row + 1);
  }
  HPCTRAIN_CHECK(!reader.next(ids), "internal error: the token streams of '{}' hold more documents than it has", input.path.string());
}

void pack_all(const std::vector<LmInput>& inputs, const LmPlan& plan, const LmPrepOptions& options, const fs::path& stem,
              int ranks, int row_length, BucketWriter& buckets, bool progress) {
  Router router{plan, buckets, {}, std::vector<uint32_t>(plan.rows.size(), 0), row_length,
                options.packing == LmPacking::bfd_split};
  if (!plan.row_position.empty()) router.packers.assign(plan.rows.size(), RowPacker(row_length));
  for (const auto& input : inputs) {
    ProgressBar bar(fmt::format("packing {}", input.path.filename().string()), input.rows, "rows", progress);
    pack_input(input, plan, stem, ranks, router, bar);
    bar.update(input.rows);
    bar.finish();
  }
  router.check_done();
  buckets.flush();
}

void write_file(const LmPrepOptions& options, const data::FileAttributes& attributes, const LmPlan& plan,
                const fs::path& stem, const Budget& budget, int threads, LmPrepReport& report) {
  data::WriterOptions writer_options;
  writer_options.compression = options.compression;
  writer_options.threads = threads;
  writer_options.queue_bytes = budget.block_bytes;
  data::DatasetWriter writer(options.output, attributes, writer_options, options.overwrite);
  for (std::size_t s = 0; s < plan.rows.size(); ++s)
    report.splits[s].tokens += write_planned_split(writer, plan, s, stem, budget.rows_per_bucket, /*loss_mask=*/false,
                                                   options.progress);
  writer.commit();
}

// The counters every rank has for its own rows, summed (all ranks take part).
void sum_over_ranks(LmPrepReport& report, const DocumentCounts& counts, dist::Comm& comm) {
  report.rows_with_invalid_utf8 = counts.invalid_utf8;
  report.truncated = counts.truncated;
  sum_row_counts_over_ranks(report.rows_with_invalid_utf8, report.truncated, report.skipped,
                            {"malformed row", "missing field", "empty text"}, comm);
}

}  // namespace

const char* to_string(LmPacking packing) {
  switch (packing) {
    case LmPacking::wrapped: return "wrapped";
    case LmPacking::bfd: return "bfd";
    case LmPacking::bfd_split: return "bfd_split";
    case LmPacking::none: return "none";
  }
  return "?";
}

LmPacking parse_lm_packing(const std::string& text) {
  if (text == "group") return LmPacking::wrapped;  // the name before bfd existed
  for (LmPacking packing : {LmPacking::wrapped, LmPacking::bfd, LmPacking::bfd_split, LmPacking::none})
    if (text == to_string(packing)) return packing;
  fail("--packing '{}': expected wrapped (or group), bfd, bfd_split or none", text);
}

LmPrepReport prep_lm(const LmPrepOptions& options) { return prep_lm(options, *dist::make_single_process_comm()); }

LmPrepReport prep_lm(const LmPrepOptions& options, dist::Comm& comm) {
  const auto start = std::chrono::steady_clock::now();
  span::Tally phases;
  span::Span reading("tokenizing", phases);
  const bool main_rank = comm.rank() == 0, progress = options.progress && main_rank;
  std::optional<tokenize::ByteLevelBpeTokenizer> tokenizer;
  int32_t eos = 0;
  LmPrepReport report;
  on_every_rank(comm, "prep lm: options and tokenizer", [&] {
    check_options(options);
    tokenizer.emplace(tokenize::ByteLevelBpeTokenizer::from_pretrained(options.tokenizer_dir));
    const auto config = tokenizer_config(options.tokenizer_dir);
    eos = eos_of(*tokenizer, options, config);
    report.row_length = row_length_of(options, config);
    // The temporaries (decompressed inputs, token streams, buckets) go next to the output.
    if (main_rank && options.output.has_parent_path()) fs::create_directories(options.output.parent_path());
  });
  const fs::path stem = temporaries_stem(options.output, comm);
  const dist::AbortCleanup cleanup([stem, output = options.output, rank = comm.rank()] {
    remove_own_temporaries(stem, output, rank);  // Note [Cleanup before an abort]
  });
  // Pass 1: check and tokenize every row of every input before any output exists (Note [Token streams]).
  // none and bfd cut each document to a row (counted); wrapped and bfd_split keep every token.
  const bool cut = options.packing == LmPacking::none || options.packing == LmPacking::bfd;
  const DocumentTokenizer how{*tokenizer, eos, cut ? report.row_length : 0,
                              threads_per_rank(options.threads, "--threads", comm)};
  const Pass1 pass{options, how, pass1_block_bytes(options), stem, progress};
  std::vector<LmInput> inputs = inputs_of(options);
  Temporaries owned;
  DocumentCounts counts;
  for (auto& input : inputs) {
    const auto format = data::to_string(data::text_format_from_path(input.path));  // throws alike on every rank
    input.read_path = decompress_for_ranks(input.path, fmt::format("{}.input-{}.{}", stem.string(), input.index, format),
                                           owned, comm, "prep lm");
    read_input(input, pass, owned, comm, report.skipped, counts);
  }
  sum_over_ranks(report, counts, comm);
  reading.stop();
  span::Span planning("planning", phases);
  std::vector<int64_t> tokens;
  const LmPlan plan = plan_all(inputs, options, report.row_length, report, tokens, comm);
  Budget budget;
  on_every_rank(comm, "prep lm: sizing the buckets", [&] { budget = plan_budget(options, plan, report.row_length); });
  for (std::size_t s = 0; s < plan.rows.size(); ++s)
    report.splits.push_back({plan.documents.names[s], plan.documents.sizes[s], tokens[s], plan.rows[s], 0,
                             plan.segments.empty() ? 0 : plan.segments[s]});
  planning.stop();
  span::Span writing("writing", phases);
  on_every_rank(comm, fmt::format("prep lm: writing '{}'", options.output.string()), [&] {
    if (!main_rank) return;
    BucketWriter buckets(stem, 0, plan.bucket_records(), budget.rows_per_bucket, budget.buffer_bytes);
    pack_all(inputs, plan, options, stem, comm.world_size(), report.row_length, buckets, progress);
    write_file(options, attributes_of(options, *tokenizer, eos, report.row_length), plan, stem, budget,
               how.threads * comm.local_size(), report);
  });
  owned.remove_all();
  writing.stop();
  for (const char* phase : {"tokenizing", "planning", "writing"}) report.phases.emplace_back(phase, phases.seconds(phase));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace hpctrain::prep
