// `hpctrain prep text|lm|images`: option descriptions → typed option structs → the prep library.
#include <fmt/format.h>

#include <iostream>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/output_check.hpp"
#include "hpctrain/prep/image_prep.hpp"
#include "hpctrain/prep/labels.hpp"
#include "hpctrain/prep/lm_prep.hpp"
#include "hpctrain/prep/text_prep.hpp"
#include "option_parsing.hpp"
#include "prep_options.hpp"

namespace hpctrain::cli {
namespace {

std::string compression_name(data::Compression compression) { return std::string(data::to_string(compression)); }

void print_histogram(const std::vector<std::string>& names, const std::vector<int64_t>& counts, int64_t total) {
  for (std::size_t i = 0; i < names.size(); ++i)
    log::info("    {:<24} {:>8}  {:5.1f}%", names[i], counts[i], 100.0 * counts[i] / std::max<int64_t>(1, total));
}

void print_report(const prep::TextPrepOptions& options, const prep::TextPrepReport& report) {
  log::info("wrote {} ({} labels, max_length {}) in {}", options.output.string(), report.label_names.size(),
            report.max_length, format_duration(report.seconds));
  std::string phases;
  for (const auto& [name, seconds] : report.phases) phases += fmt::format("{}{} {:.1f} s", phases.empty() ? "" : ", ", name, seconds);
  if (!phases.empty()) log::info("  phases (rank 0): {}", phases);
  for (const auto& split : report.splits) {
    log::info("  {}: {} examples, {} tokens", split.name, split.examples, split.tokens);
    print_histogram(report.label_names, split.label_counts, split.examples);
  }
  if (report.truncated > 0) log::info("  {} examples were truncated to {} tokens", report.truncated, report.max_length);
  for (const auto& [reason, count] : report.skipped) log::warning("skipped {} rows: {}", count, reason);
  if (report.rows_with_invalid_utf8 > 0)
    log::warning("{} rows held invalid UTF-8; each invalid byte sequence was replaced by U+FFFD and dropped by the tokenizer",
                 report.rows_with_invalid_utf8);
}

std::string lm_rows(prep::LmPacking packing, int row_length) {
  switch (packing) {
    case prep::LmPacking::wrapped: return fmt::format("rows of {} tokens", row_length);
    case prep::LmPacking::none: return fmt::format("one row per document, at most {} tokens", row_length);
    default: return fmt::format("rows of whole documents, at most {} tokens, best-fit-decreasing", row_length);
  }
}

void print_report(const prep::LmPrepOptions& options, const prep::LmPrepReport& report) {
  log::info("wrote {} ({}) in {}", options.output.string(), lm_rows(options.packing, report.row_length),
            format_duration(report.seconds));
  std::string phases;
  for (const auto& [name, seconds] : report.phases) phases += fmt::format("{}{} {:.1f} s", phases.empty() ? "" : ", ", name, seconds);
  if (!phases.empty()) log::info("  phases (rank 0): {}", phases);
  for (const auto& split : report.splits) {
    log::info("  {}: {} documents ({} tokens) -> {} rows ({} tokens), fill {:.1f} % (tokens / (rows x {}))", split.name,
              split.documents, split.document_tokens, split.rows, split.tokens,
              100.0 * static_cast<double>(split.tokens) / static_cast<double>(std::max<int64_t>(1, split.rows * report.row_length)),
              report.row_length);
    if (options.packing == prep::LmPacking::wrapped && split.document_tokens > split.tokens)
      log::info("    the last {} tokens did not fill a row and were dropped", split.document_tokens - split.tokens);
    if (options.packing == prep::LmPacking::bfd_split && split.segments > split.documents)
      log::info("    {} documents longer than a row were split: {} pieces packed", split.segments - split.documents,
                split.segments);
  }
  if (report.truncated > 0 && options.packing == prep::LmPacking::bfd)
    log::warning("{} documents were longer than a row and cut to their first {} tokens (their other tokens are not in "
                 "the file; --packing bfd_split keeps them as further pieces)", report.truncated, report.row_length);
  else if (report.truncated > 0)
    log::info("  {} documents were cut to {} tokens", report.truncated, report.row_length);
  for (const auto& [reason, count] : report.skipped) log::warning("skipped {} rows: {}", count, reason);
  if (report.rows_with_invalid_utf8 > 0)
    log::warning("{} rows held invalid UTF-8; each invalid byte sequence was read as U+FFFD", report.rows_with_invalid_utf8);
}

// The options of `prep lm` (docs: README "Preparing data", docs/hdf5-format.md "causal-lm").
struct LmOptionText {
  std::vector<std::string> inputs;
  std::string validation_input, tokenizer, output, packing = "wrapped", compression;
  double collective_timeout = dist::kDefaultCollectiveTimeoutSeconds;
};

po::options_description lm_options(prep::LmPrepOptions& options, LmOptionText& text) {
  po::options_description data_options("Input");
  data_options.add_options()
      ("input", po::value(&text.inputs)->required()->multitoken(), "documents: .csv, .tsv or .jsonl, optionally .gz; several files are concatenated in this order")
      ("validation-input", po::value(&text.validation_input), "a separate validation file (instead of --validation-fraction)")
      ("text-field", po::value(&options.text_field)->default_value(options.text_field), "column or key of a document's text")
      ("skip-invalid", po::bool_switch(&options.skip_invalid), "skip bad rows and report counts by reason");
  po::options_description tokenizer_options("Tokenizer and rows");
  tokenizer_options.add_options()
      ("tokenizer", po::value(&text.tokenizer)->required(), "Hugging Face folder with a byte-level BPE tokenizer.json and tokenizer_config.json (its eos_token ends every document)")
      ("block-size", po::value(&options.block_size)->default_value(0), "--packing wrapped: tokens per row (0: min(1024, model_max_length), as run_clm)")
      ("packing", po::value(&text.packing)->default_value(text.packing), "wrapped (or group): documents concatenated and cut into rows of --block-size tokens, the rest dropped; bfd: whole documents (cut to --max-length, counted) packed into rows of up to --max-length tokens by best-fit-decreasing, their boundaries kept (positions restart and attention stops at each); bfd_split: as bfd, documents longer than a row split into pieces; none: one row per document")
      ("max-length", po::value(&options.max_length), "--packing bfd, bfd_split: tokens per row; none: a document's first N tokens (default: as --block-size)");
  po::options_description all;
  all.add(data_options).add(tokenizer_options).add(corpus_output_options(
      {text.output, options.validation_fraction, options.seed, text.compression, options.overwrite, options.threads,
       options.memory_mb, text.collective_timeout},
      "share of the documents held out (split before packing, seeded)"));
  return all;
}

}  // namespace

std::filesystem::path check_corpus_output(const std::string& output, const std::filesystem::path& tokenizer_dir,
                                          std::vector<std::filesystem::path> inputs, bool overwrite,
                                          double collective_timeout, dist::Comm& comm) {
  std::vector<std::filesystem::path> guarded = io::files_in(tokenizer_dir);
  guarded.insert(guarded.end(), inputs.begin(), inputs.end());
  const std::filesystem::path checked = io::check_output_file(output, guarded, overwrite);
  HPCTRAIN_CHECK(collective_timeout >= 0 && collective_timeout <= 1e9, "--collective-timeout {}: expected seconds >= 0 "
                 "(0 = off)", collective_timeout);
  comm.set_collective_timeout(collective_timeout);
  return checked;
}

po::options_description corpus_output_options(const CorpusOutputFields& f, const char* held_out) {
  po::options_description options("Output");
  options.add_options()
      ("output", po::value(&f.output)->required(), "the HDF5 file to write")
      ("validation-fraction", po::value(&f.validation_fraction)->default_value(0.0), held_out)
      ("seed", po::value(&f.seed)->default_value(f.seed), "seed of the split and of the one shuffle of the rows")
      ("compression", po::value(&f.compression)->default_value(f.compression), "none | gzip")
      ("overwrite", po::bool_switch(&f.overwrite), "replace an existing output file")
      ("threads", po::value(&f.threads)->default_value(0), "tokenizer threads per rank (0: the node's cores / its ranks)")
      ("memory-mb", po::value(&f.memory_mb)->default_value(f.memory_mb), "memory per rank for documents and rows, MiB (beyond the program's own ~100 MiB)")
      ("collective-timeout", po::value(&f.collective_timeout)->default_value(f.collective_timeout),
       "seconds a collective may wait for the other ranks before the job ends naming the missing ones (0: off)")
      ("no-progress", "no progress bar");
  return options;
}

int prep_lm_command(const Args& args, const std::string& command_line, dist::Comm& comm) {
  prep::LmPrepOptions options;
  LmOptionText text;
  text.compression = compression_name(options.compression);
  po::options_description all = lm_options(options, text);
  po::variables_map values;
  if (!parse_options(args, "hpctrain prep lm --input FILE... --tokenizer DIR --output FILE.h5 [options]", all, values)) return 0;
  options.packing = prep::parse_lm_packing(text.packing);
  // --max-length given as 0 is refused here (prep::LmPrepOptions reads 0 as "the default"); 1 and the upper bound
  // are checked with --block-size's by prep::check_options, with this message.
  HPCTRAIN_CHECK(values.count("max-length") == 0 || options.max_length != 0,
                 "--max-length 0: expected 2 to {} tokens per row (a row of one token predicts nothing); omit it for "
                 "min(1024, model_max_length)", 1 << 24);
  for (const auto& input : text.inputs) options.inputs.emplace_back(input);
  options.validation_input = text.validation_input;
  options.tokenizer_dir = text.tokenizer;
  options.compression = data::parse_compression(text.compression);
  options.progress = values.count("no-progress") == 0;
  options.created_by = command_line;
  std::vector<std::filesystem::path> inputs = options.inputs;
  inputs.push_back(options.validation_input);
  options.output = check_corpus_output(text.output, options.tokenizer_dir, inputs, options.overwrite,
                                       text.collective_timeout, comm);
  const auto report = prep::prep_lm(options, comm);
  if (comm.rank() == 0) print_report(options, report);
  return 0;
}

int prep_text_command(const Args& args, const std::string& command_line, dist::Comm& comm) {
  prep::TextPrepOptions options;
  std::string labels, compression = compression_name(options.compression), input, validation_input, test_input, tokenizer,
              output;
  double collective_timeout = dist::kDefaultCollectiveTimeoutSeconds;
  po::options_description data_options("Input");
  data_options.add_options()
      ("input", po::value(&input)->required(), "rows: .csv, .tsv or .jsonl, optionally .gz")
      ("validation-input", po::value(&validation_input), "a separate validation file (instead of --validation-fraction)")
      ("test-input", po::value(&test_input), "an optional test split")
      ("text-field", po::value(&options.text_field)->default_value(options.text_field), "column or key of the text")
      ("text-pair-field", po::value(&options.text_pair_field), "column or key of the second sentence (pairs)")
      ("label-field", po::value(&options.label_field)->default_value(options.label_field), "column or key of the label")
      ("labels", po::value(&labels), "label order, comma-separated (default: sorted unique values)")
      ("skip-invalid", po::bool_switch(&options.skip_invalid), "skip bad rows and report counts by reason");
  po::options_description tokenizer_options("Tokenizer");
  tokenizer_options.add_options()
      ("tokenizer", po::value(&tokenizer)->required(), "Hugging Face model folder with vocab.txt (+ tokenizer_config.json) or tokenizer.json")
      ("max-length", po::value(&options.max_length)->default_value(0), "tokens per example incl. [CLS]/[SEP] (0: the tokenizer's model_max_length, at most 512)");
  po::options_description output_options("Output");
  output_options.add_options()
      ("output", po::value(&output)->required(), "the HDF5 file to write")
      ("validation-fraction", po::value(&options.validation_fraction)->default_value(0.0), "share of --input held out, stratified by label")
      ("seed", po::value(&options.seed)->default_value(options.seed), "seed of the split and of the one shuffle when writing")
      ("compression", po::value(&compression)->default_value(compression), "none | gzip")
      ("overwrite", po::bool_switch(&options.overwrite), "replace an existing output file")
      ("threads", po::value(&options.threads)->default_value(0), "tokenizer threads per rank (0: the node's cores / its ranks)")
      ("memory-mb", po::value(&options.memory_mb)->default_value(options.memory_mb), "memory per rank for rows and tokens, MiB (beyond the program's own ~100 MiB)")
      ("collective-timeout", po::value(&collective_timeout)->default_value(collective_timeout),
       "seconds a collective may wait for the other ranks before the job ends naming the missing ones (0: off)")
      ("no-progress", "no progress bar");
  po::options_description all;
  all.add(data_options).add(tokenizer_options).add(output_options);
  po::variables_map values;
  if (!parse_options(args, "hpctrain prep text --input ROWS --tokenizer DIR --output FILE.h5 [options]", all, values)) return 0;
  options.input = input;
  options.validation_input = validation_input;
  options.test_input = test_input;
  options.tokenizer_dir = tokenizer;
  options.output = output;
  options.labels = prep::split_commas(labels);
  options.compression = data::parse_compression(compression);
  options.progress = values.count("no-progress") == 0;
  options.created_by = command_line;
  std::vector<std::filesystem::path> inputs = io::files_in(options.tokenizer_dir);
  inputs.insert(inputs.end(), {options.input, options.validation_input, options.test_input});
  options.output = io::check_output_file(options.output, inputs, options.overwrite);
  HPCTRAIN_CHECK(collective_timeout >= 0 && collective_timeout <= 1e9, "--collective-timeout {}: expected seconds >= 0 (0 = off)",
                 collective_timeout);
  comm.set_collective_timeout(collective_timeout);
  const auto report = prep::prep_text(options, comm);
  if (comm.rank() == 0) print_report(options, report);
  return 0;
}

int prep_images_command(const Args& args, const std::string& command_line) {
  prep::ImagePrepOptions options;
  std::string labels, compression = compression_name(options.compression), input_dir, train_images, train_labels,
              validation_images, validation_labels, output;
  po::options_description input_options("Input");
  input_options.add_options()
      ("input-dir", po::value(&input_dir), "folder with the four standard MNIST file names (.gz or plain)")
      ("train-images", po::value(&train_images), "IDX images of the train split")
      ("train-labels", po::value(&train_labels), "IDX labels of the train split")
      ("validation-images", po::value(&validation_images), "IDX images of the validation split")
      ("validation-labels", po::value(&validation_labels), "IDX labels of the validation split")
      ("labels", po::value(&labels), "label names, comma-separated, or a preset: fashion-mnist | mnist (default: 0..K-1)");
  po::options_description output_options("Output");
  output_options.add_options()
      ("output", po::value(&output)->required(), "the HDF5 file to write")
      ("seed", po::value(&options.seed)->default_value(options.seed), "seed of the one shuffle when writing")
      ("compression", po::value(&compression)->default_value(compression), "none | gzip")
      ("overwrite", po::bool_switch(&options.overwrite), "replace an existing output file");
  po::options_description all;
  all.add(input_options).add(output_options);
  po::variables_map values;
  if (!parse_options(args, "hpctrain prep images --input-dir DIR --output FILE.h5 [options]", all, values)) return 0;
  options.input_dir = input_dir;
  options.train_images = train_images;
  options.train_labels = train_labels;
  options.validation_images = validation_images;
  options.validation_labels = validation_labels;
  options.output = output;
  options.labels = prep::split_commas(labels);
  options.compression = data::parse_compression(compression);
  options.created_by = command_line;
  std::vector<std::filesystem::path> inputs = io::files_in(options.input_dir);
  inputs.insert(inputs.end(), {options.train_images, options.train_labels, options.validation_images,
                               options.validation_labels});
  options.output = io::check_output_file(options.output, inputs, options.overwrite);
  const auto report = prep::prep_images(options);
  log::info("wrote {} ({} labels, images {}x{}x{})", options.output.string(), report.label_names.size(), report.channels,
            report.height, report.width);
  for (const auto& split : report.splits) {
    log::info("  {}: {} examples", split.name, split.examples);
    print_histogram(report.label_names, split.label_counts, split.examples);
  }
  return 0;
}

}  // namespace hpctrain::cli
