// `prep sft` at corpus scale, as `prep lm` (Note [Token streams] in lm_prep.cpp): every rank reads its byte range
// of each input, renders each row with the chat template and tokenizes it on all its threads into a token stream
// with a loss mask; the ranks agree on the first bad row and on the plan (the seeded split and the one shuffle,
// LmPlan: one row per example, or --packing bfd's rows of whole examples), then rank 0 reads the streams in input
// order, routes every example to the bucket file of its position (Note [Bucket files]) and writes the buckets in
// order. The output does not depend on the ranks, threads or --memory-mb.
//
// Note [SFT rows are documents]
// An SFT example (a conversation or a prompt/completion pair, cut to --max-length) is what `prep lm` calls a
// document: without packing one row, with --packing bfd a segment of `prep lm`'s planner (plan_document_rows, as
// TRL's pack_dataset(strategy="bfd")), rows joined by RowJoiner. A packed row keeps each example's loss mask and
// marks its first token in document_start, so training restarts positions, stops attention at the boundary and
// never targets an example's first token (Note [Causal-LM labels]): the row trains as its examples alone.
#include "hpctrain/prep/sft_prep.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <fstream>

#include "hpctrain/chat/chat_encoding.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/core/sha256.hpp"
#include "hpctrain/core/span.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "lm_documents.hpp"
#include "lm_packing.hpp"
#include "prep_common.hpp"
#include "sft_rows.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep {
// A named namespace around the anonymous one: its helpers share names with lm_prep.cpp's, and a unity build
// compiles both files as one (Note [Unity build]).
namespace sft_pipeline {
namespace {
using namespace detail;
namespace fs = std::filesystem;

using SftInput = DocumentInput;  // (lm_documents.hpp)

// Counters of one rank's rows (summed over the ranks at the end of pass 1).
struct SftCounts {
  int64_t conversations = 0, prompt_completions = 0, truncated = 0, dropped = 0, invalid_utf8 = 0;
  int64_t end_of_turn_targets = 0;
};

fs::path stream_path(const fs::path& stem, int rank, std::size_t input) {
  return fmt::format("{}.r{}.i{}.sft", stem.string(), rank, input);
}

void check_options(const SftPrepOptions& options) {
  HPCTRAIN_CHECK(!options.inputs.empty(), "--input is required");
  HPCTRAIN_CHECK(!options.output.empty(), "--output is required");
  HPCTRAIN_CHECK(!options.tokenizer_dir.empty(), "--tokenizer is required (a Hugging Face folder with tokenizer.json)");
  HPCTRAIN_CHECK(options.validation_fraction >= 0.0 && options.validation_fraction < 1.0,
                 "--validation-fraction must be in [0, 1), got {}", options.validation_fraction);
  HPCTRAIN_CHECK(options.validation_input.empty() || options.validation_fraction == 0.0,
                 "--validation-input and --validation-fraction exclude each other");
  HPCTRAIN_CHECK(options.max_length >= 0, "--max-length {}: expected a number of tokens (0: no limit)", options.max_length);
  HPCTRAIN_CHECK(options.packing == LmPacking::none || options.packing == LmPacking::bfd,
                 "--packing {}: prep sft packs whole examples: expected none or bfd", to_string(options.packing));
  HPCTRAIN_CHECK(options.packing == LmPacking::none || options.max_length > 0,
                 "--packing bfd packs examples into rows of --max-length tokens: --max-length 0 (no limit) gives no rows");
  HPCTRAIN_CHECK(options.memory_mb >= 1, "--memory-mb must be at least 1, got {}", options.memory_mb);
  HPCTRAIN_CHECK(options.template_kwargs.is_object(), "--template-kwargs must be a JSON object");
  std::vector<fs::path> paths = options.inputs;
  if (!options.validation_input.empty()) paths.push_back(options.validation_input);
  for (const auto& path : paths) {
    HPCTRAIN_CHECK(fs::is_regular_file(path), "input file '{}' does not exist", path.string());
    HPCTRAIN_CHECK(fs::absolute(path).lexically_normal() != fs::absolute(options.output).lexically_normal(),
                   "--output '{}' is also an input: prep never overwrites its inputs", options.output.string());
  }
}

// The tokenizer, its chat template and the encoder, as one unit every rank builds the same way.
struct Encoding {
  tokenize::ByteLevelBpeTokenizer tokenizer;
  chat::TokenizerChat chat;
  std::optional<chat::ChatEncoder> encoder;
  int32_t eos = 0;
};

std::unique_ptr<Encoding> load_encoding(const SftPrepOptions& options) {
  auto encoding = std::unique_ptr<Encoding>(new Encoding{tokenize::ByteLevelBpeTokenizer::from_pretrained(options.tokenizer_dir),
                                                         {}, std::nullopt, 0});
  const auto eos = encoding->tokenizer.eos_id();
  HPCTRAIN_CHECK(eos.has_value(), "{}: the tokenizer has no EOS token (tokenizer_config.json's eos_token); SFT needs it "
                 "to end completions and to check that the model learns to stop", options.tokenizer_dir.string());
  encoding->eos = *eos;
  encoding->chat = chat::load_tokenizer_chat(options.tokenizer_dir, options.chat_template, /*with_tools=*/false);
  if (!encoding->chat.template_source.empty())
    encoding->encoder.emplace(encoding->tokenizer, encoding->chat, options.template_kwargs);
  return encoding;
}

data::FileAttributes attributes_of(const SftPrepOptions& options, const Encoding& encoding, const SftPrepReport& report) {
  data::FileAttributes attributes;
  attributes.task = data::Task::causal_lm;
  std::vector<std::string> names;
  for (const auto& input : options.inputs) names.push_back(input.filename().string());
  attributes.source = fmt::format("{}", fmt::join(names, ","));
  attributes.created_by = options.created_by;
  const auto& tokenizer = encoding.tokenizer;
  nlohmann::json described = {{"type", "byte-level-bpe"}, {"vocab_size", tokenizer.vocab_size()}, {"eos_id", encoding.eos},
                              {"bos_id", tokenizer.bos_id() ? nlohmann::json(*tokenizer.bos_id()) : nlohmann::json()},
                              {"packing", to_string(options.packing)}, {"max_length", report.max_length}, {"loss_mask", to_string(options.loss_on)},
                              {"mask_method", report.mask_method},
                              {"end_of_turn_id", report.end_of_turn_id ? nlohmann::json(*report.end_of_turn_id) : nlohmann::json()}};
  for (const auto& file : tokenizer.files())
    if (file.filename() == "tokenizer.json") described["tokenizer_json_sha256"] = sha256_file_hex(file);
  if (!encoding.chat.template_source.empty()) described["chat_template_sha256"] = sha256_hex(encoding.chat.template_source);
  attributes.tokenizer = described;
  return attributes;
}

std::vector<SftInput> inputs_of(const SftPrepOptions& options) {
  return document_inputs(options.inputs, options.validation_input);
}

// ---- pass 1: rows → examples → token streams ----

struct Pass1 {
  const SftPrepOptions& options;
  const Encoding& encoding;
  int threads = 1;
  std::size_t block_bytes = 0;
  fs::path stem;
  bool progress = false;
};

using Outcome = std::variant<SftExample, RowProblem>;

// Reads and encodes a block of rows on all threads; the outcomes keep the rows' order.
std::vector<Outcome> encode_block(const std::vector<data::TextRecord>& records, data::TextFormat format, const Pass1& pass,
                                  std::vector<uint8_t>& conversational) {
  constexpr std::size_t kChunk = 16;
  std::vector<Outcome> outcomes(records.size());
  conversational.assign(records.size(), 0);
  parallel_chunks((records.size() + kChunk - 1) / kChunk, pass.threads, [&](std::size_t c) {
    for (std::size_t i = c * kChunk; i < std::min(records.size(), (c + 1) * kChunk); ++i) {
      auto row = read_sft_row(records[i], format);
      if (auto* bad = std::get_if<RowProblem>(&row)) {
        outcomes[i] = std::move(*bad);
        continue;
      }
      const SftRow& parsed = std::get<SftRow>(row);
      conversational[i] = parsed.kind == SftRowKind::text_pair ? 0 : 1;
      if (parsed.kind != SftRowKind::text_pair && !pass.encoding.encoder) {
        outcomes[i] = RowProblem{"no chat template", fmt::format("a conversational row needs a chat template, and {} has "
                                 "none\n  hint: pass --chat-template FILE", pass.options.tokenizer_dir.string())};
        continue;
      }
      const SftEncoders encoders{pass.encoding.tokenizer, pass.encoding.chat.special_tokens.value("eos_token", ""),
                                 pass.encoding.encoder ? &*pass.encoding.encoder : nullptr};
      outcomes[i] = encode_sft_row(encoders, parsed, pass.options.loss_on, pass.options.max_length);
    }
  });
  return outcomes;
}

bool is_end_of_turn(int32_t id, const Encoding& encoding) {
  return id == encoding.eos || (encoding.encoder && encoding.encoder->end_of_turn() == id);
}

// Writes the block's examples to the stream and records them; the first bad row stops the range.
void take_block(std::vector<data::TextRecord>& records, SftInput& input, const Pass1& pass, TokenStreamWriter& stream,
                std::map<std::string, int64_t>& skipped, std::optional<BadRow>& bad, SftCounts& counts) {
  std::vector<uint8_t> conversational;
  std::vector<Outcome> outcomes = encode_block(records, data::text_format_from_path(input.path), pass, conversational);
  for (std::size_t i = 0; i < outcomes.size() && !bad; ++i) {
    if (const auto* problem = std::get_if<RowProblem>(&outcomes[i])) {
      input.local_valid.push_back(0);
      if (pass.options.skip_invalid) ++skipped[problem->reason];
      else bad = BadRow{records[i].line, records[i].row, problem->detail};
      continue;
    }
    const SftExample& example = std::get<SftExample>(outcomes[i]);
    counts.invalid_utf8 += records[i].replaced_invalid_utf8 ? 1 : 0;
    ++(conversational[i] ? counts.conversations : counts.prompt_completions);
    counts.truncated += example.truncated ? 1 : 0;
    if (std::find(example.mask.begin(), example.mask.end(), 1) == example.mask.end()) {  // its targets were cut off
      input.local_valid.push_back(0);
      ++counts.dropped;
      continue;
    }
    for (std::size_t t = 0; t < example.ids.size(); ++t)
      counts.end_of_turn_targets += example.mask[t] && is_end_of_turn(example.ids[t], pass.encoding) ? 1 : 0;
    input.local_valid.push_back(1);
    input.local_lengths.push_back(static_cast<uint32_t>(example.ids.size()));
    stream.write(example.ids, example.mask);
  }
  records.clear();
}

std::optional<BadRow> encode_range(SftInput& input, const Pass1& pass, int rank, std::map<std::string, int64_t>& skipped,
                                   SftCounts& counts) {
  data::TextReaderOptions reader_options = input.range;
  reader_options.display_path = input.path;
  const data::TextFormat format = data::text_format_from_path(input.path);
  reader_options.jsonl_whole_lines = format == data::TextFormat::jsonl;
  data::TextRecordReader reader(input.read_path, format, sft_fields(format), reader_options);
  TokenStreamWriter stream(stream_path(pass.stem, rank, input.index), /*with_mask=*/true);
  ProgressBar bar(fmt::format("rendering {}", input.path.filename().string()), 0, "rows", pass.progress);
  std::vector<data::TextRecord> records;
  std::size_t bytes = 0;
  std::optional<BadRow> bad;
  data::TextRecord record;
  while (!bad && reader.next(record)) {
    for (const auto& field : record.fields) bytes += (field ? field->size() : 0) + 64;
    records.push_back(std::move(record));
    if (bytes < pass.block_bytes) continue;
    take_block(records, input, pass, stream, skipped, bad, counts);
    bytes = 0;
    bar.update(static_cast<int64_t>(input.local_valid.size()), reader.bytes_consumed(), reader.file_size());
  }
  if (!bad) take_block(records, input, pass, stream, skipped, bad, counts);
  stream.close();
  bar.update(static_cast<int64_t>(input.local_valid.size()), reader.bytes_consumed(), reader.file_size());
  bar.finish();
  return bad;
}

// Pass 1 of one input (read_on_every_rank), its token stream owned by `owned` until the end.
void read_input(SftInput& input, const Pass1& pass, Temporaries& owned, dist::Comm& comm,
                std::map<std::string, int64_t>& skipped, SftCounts& counts) {
  owned.add(stream_path(pass.stem, comm.rank(), input.index));
  read_on_every_rank(input, comm, "prep sft",
                     [&](SftInput& in) { return encode_range(in, pass, comm.rank(), skipped, counts); });
}

// ---- the plan: every rank the same ----

LmPlan plan_all(std::vector<SftInput>& inputs, const SftPrepOptions& options, const SftPrepReport& report, dist::Comm& comm) {
  auto valid = gather_documents(inputs, comm);
  int64_t skipped = 0;
  for (const auto& [reason, count] : report.skipped) skipped += count;
  LmPlan plan;
  on_every_rank(comm, "prep sft: planning the splits", [&] {
    plan = plan_documents(valid, options.validation_fraction, options.seed);
    for (std::size_t s = 0; s < plan.documents.names.size(); ++s)
      HPCTRAIN_CHECK(plan.documents.sizes[s] > 0, "split '{}' has no examples ({} input rows were skipped as invalid, {} "
                     "lost their targets to --max-length)", plan.documents.names[s], skipped, report.dropped_after_truncation);
  });
  const bool packed = options.packing == LmPacking::bfd;  // Note [SFT rows are documents]
  std::vector<std::vector<uint32_t>> lengths;
  if (packed) lengths = lengths_per_split(inputs, plan, comm);
  on_every_rank(comm, "prep sft: planning the rows", [&] {
    if (packed) plan_document_rows(plan, lengths, options.max_length, /*split_long=*/false, options.seed);
    else plan_rows(plan, std::vector<int64_t>(plan.documents.names.size(), 0), /*block_size=*/0, options.seed);
  });
  return plan;
}

// ---- pass 2 (rank 0): streams → buckets → the file ----

// Note [SFT rows are documents]: one example at its planned position among the rows (or segments).
void route_example(BucketWriter& buckets, std::size_t split, uint32_t position, const std::vector<int32_t>& ids,
                   const std::vector<uint8_t>& mask, int64_t source_row) {
  static const std::vector<uint8_t> kNoTypes;
  data::TextExamples row;
  row.append(ids, kNoTypes, data::kNoLabel, source_row, /*starts=*/{}, mask);
  buckets.add(split, position, row, 0);
}

void route_all(const std::vector<SftInput>& inputs, const LmPlan& plan, const fs::path& stem, int ranks,
               BucketWriter& buckets, SftPrepReport& report, bool progress) {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
  std::vector<uint32_t> placed(plan.rows.size(), 0);  // per split: segments routed (bfd)
  for (const auto& input : inputs) {
    ProgressBar bar(fmt::format("routing {}", input.path.filename().string()), input.rows, "rows", progress);
    std::vector<fs::path> streams;
    for (int r = 0; r < ranks; ++r) streams.push_back(stream_path(stem, r, input.index));
    TokenStreamReader reader(std::move(streams), /*with_mask=*/true);
    const FileRows& examples = plan.documents.files[input.plan_file];
    for (int64_t row = 0; row < input.rows; ++row) {
      const auto at = static_cast<std::size_t>(input.plan_first + row);
      if (examples.split[at] == kSkipped) continue;
      HPCTRAIN_CHECK(reader.next(ids, mask), "internal error: the streams of '{}' end before row {}", input.path.string(), row);
      const uint8_t s = examples.split[at];
      const uint32_t position = plan.segment_position.empty() ? examples.position[at] : plan.segment_position[s][placed[s]++];
      route_example(buckets, s, position, ids, mask, row);
      report.splits[s].target_tokens += std::count(mask.begin(), mask.end(), 1);
      if ((row & 1023) == 0) bar.update(row + 1);
    }
    HPCTRAIN_CHECK(!reader.next(ids, mask), "internal error: the streams of '{}' hold more examples than it has", input.path.string());
    bar.update(input.rows);
    bar.finish();
  }
  buckets.flush();
}

Budget budget_of(const SftPrepOptions& options, const LmPlan& plan, int64_t longest_row) {
  int64_t rows = 0, segments = 0, buckets_hint = 0;
  for (int64_t count : plan.rows) rows += count;
  for (int64_t count : plan.segments) segments += count;
  const int64_t total = static_cast<int64_t>(options.memory_mb) << 20;
  const int64_t plan_bytes = (rows + segments) * 13 + segments * 12 + rows * 4;  // as prep lm's (lm_prep.cpp)
  const int64_t data = total - plan_bytes;
  HPCTRAIN_CHECK(data >= (int64_t{1} << 20), "--memory-mb {} is too small for {} rows: the plan alone needs {} MiB",
                 options.memory_mb, rows, (plan_bytes >> 20) + 1);
  Budget budget;
  budget.block_bytes = static_cast<std::size_t>(data / 16);
  const int64_t worst_row = longest_row * 5 + 64;
  budget.rows_per_bucket = std::max<int64_t>(1, data / 2 / (2 * worst_row));
  for (int64_t count : plan.bucket_records()) buckets_hint += (count + budget.rows_per_bucket - 1) / budget.rows_per_bucket;
  budget.buffer_bytes = std::max<std::size_t>(4096, static_cast<std::size_t>(data / 8 / std::max<int64_t>(1, buckets_hint)));
  return budget;
}

void write_file(const SftPrepOptions& options, const data::FileAttributes& attributes, const LmPlan& plan,
                const fs::path& stem, const Budget& budget, int threads, SftPrepReport& report) {
  data::WriterOptions writer_options;
  writer_options.compression = options.compression;
  writer_options.threads = threads;
  writer_options.queue_bytes = budget.block_bytes;
  data::DatasetWriter writer(options.output, attributes, writer_options, options.overwrite);
  for (std::size_t s = 0; s < plan.rows.size(); ++s)
    report.splits[s].tokens += write_planned_split(writer, plan, s, stem, budget.rows_per_bucket, /*loss_mask=*/true,
                                                   options.progress);
  writer.commit();
}

// The counters every rank has for its own rows, summed; then the check that the model learns to stop.
void sum_over_ranks(SftPrepReport& report, const SftCounts& counts, const Encoding& encoding, dist::Comm& comm) {
  int64_t totals[6] = {counts.conversations, counts.prompt_completions, counts.dropped, counts.end_of_turn_targets, 0, 0};
  comm.allreduce(totals, 6);
  report.conversations = totals[0];
  report.prompt_completions = totals[1];
  report.dropped_after_truncation = totals[2];
  report.end_of_turn_targets = totals[3];
  report.rows_with_invalid_utf8 = counts.invalid_utf8;
  report.truncated = counts.truncated;
  sum_row_counts_over_ranks(report.rows_with_invalid_utf8, report.truncated, report.skipped,
                            {"malformed row", "malformed messages", "missing field", "template error", "no tokens",
                             "no trainable token", "no chat template", "loss on completion", "loss on assistant"},
                            comm);
  on_every_rank(comm, "prep sft: checking that the model learns to stop", [&] {
    const std::string eot = report.end_of_turn_id ? fmt::format(" or the template's end-of-turn token '{}' (id {})",
        encoding.tokenizer.decode({*report.end_of_turn_id}), *report.end_of_turn_id) : std::string();
    HPCTRAIN_CHECK(report.end_of_turn_targets > 0,
                   "no row has the EOS token '{}' (id {}){} inside its loss mask: a model fine-tuned on this data never "
                   "learns to end its turn\n  hint: a chat template whose assistant turns end with the end-of-turn token "
                   "(with {{% generation %}} blocks that include it), or --loss-on all",
                   encoding.tokenizer.decode({encoding.eos}), encoding.eos, eot);
  });
}

}  // namespace
}  // namespace sft_pipeline

LossOn parse_loss_on(const std::string& text) {
  if (text == "auto") return LossOn::automatic;
  if (text == "assistant") return LossOn::assistant;
  if (text == "completion") return LossOn::completion;
  if (text == "all") return LossOn::all;
  fail("--loss-on '{}': expected assistant, completion or all", text);
}

const char* to_string(LossOn loss_on) {
  switch (loss_on) {
    case LossOn::automatic: return "auto";
    case LossOn::assistant: return "assistant";
    case LossOn::completion: return "completion";
    case LossOn::all: return "all";
  }
  return "?";
}

SftPrepReport prep_sft(const SftPrepOptions& options) { return prep_sft(options, *dist::make_single_process_comm()); }

SftPrepReport prep_sft(const SftPrepOptions& options, dist::Comm& comm) {
  using namespace detail;
  namespace fs = std::filesystem;
  const auto start = std::chrono::steady_clock::now();
  span::Tally phases;
  span::Span reading("rendering", phases);
  const bool main_rank = comm.rank() == 0, progress = options.progress && main_rank;
  std::unique_ptr<sft_pipeline::Encoding> encoding;
  SftPrepReport report;
  on_every_rank(comm, "prep sft: options, tokenizer and chat template", [&] {
    sft_pipeline::check_options(options);
    encoding = sft_pipeline::load_encoding(options);
    report.eos_id = encoding->eos;
    report.max_length = options.max_length;
    if (encoding->encoder) {
      report.mask_method = encoding->encoder->mask_method() == chat::MaskMethod::generation ? "generation" : "prefixes";
      report.end_of_turn_id = encoding->encoder->end_of_turn();
    }
    if (main_rank && options.output.has_parent_path()) fs::create_directories(options.output.parent_path());
  });
  const fs::path stem = temporaries_stem(options.output, comm);
  const dist::AbortCleanup cleanup([stem, output = options.output, rank = comm.rank()] {
    remove_own_temporaries(stem, output, rank);  // Note [Cleanup before an abort]
  });
  const int threads = threads_per_rank(options.threads, "--threads", comm);
  const std::size_t block_bytes = std::max<std::size_t>(std::size_t{1} << 16, (std::size_t(options.memory_mb) << 20) / 16);
  const sft_pipeline::Pass1 pass{options, *encoding, threads, block_bytes, stem, progress};
  std::vector<sft_pipeline::SftInput> inputs = sft_pipeline::inputs_of(options);
  Temporaries owned;
  sft_pipeline::SftCounts counts;
  for (auto& input : inputs) {
    const auto format = data::to_string(data::text_format_from_path(input.path));  // throws alike on every rank
    input.read_path = decompress_for_ranks(input.path, fmt::format("{}.input-{}.{}", stem.string(), input.index, format),
                                           owned, comm, "prep sft");
    sft_pipeline::read_input(input, pass, owned, comm, report.skipped, counts);
  }
  sft_pipeline::sum_over_ranks(report, counts, *encoding, comm);
  reading.stop();
  span::Span planning("planning", phases);
  const LmPlan plan = sft_pipeline::plan_all(inputs, options, report, comm);
  int64_t longest = 0;
  for (const auto& input : inputs)
    for (uint32_t length : input.local_lengths) longest = std::max<int64_t>(longest, length);
  longest = comm.allreduce_value(longest, dist::ReduceOp::max);
  Budget budget;
  on_every_rank(comm, "prep sft: sizing the buckets", [&] { budget = sft_pipeline::budget_of(options, plan, longest); });
  for (std::size_t s = 0; s < plan.rows.size(); ++s)
    report.splits.push_back({plan.documents.names[s], plan.documents.sizes[s], plan.rows[s], 0, 0});
  planning.stop();
  span::Span writing("writing", phases);
  on_every_rank(comm, fmt::format("prep sft: writing '{}'", options.output.string()), [&] {
    if (!main_rank) return;
    BucketWriter buckets(stem, 0, plan.bucket_records(), budget.rows_per_bucket, budget.buffer_bytes);
    sft_pipeline::route_all(inputs, plan, stem, comm.world_size(), buckets, report, progress);
    sft_pipeline::write_file(options, sft_pipeline::attributes_of(options, *encoding, report), plan, stem, budget,
                             threads * comm.local_size(), report);
  });
  owned.remove_all();
  writing.stop();
  for (const char* phase : {"rendering", "planning", "writing"}) report.phases.emplace_back(phase, phases.seconds(phase));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace hpctrain::prep
