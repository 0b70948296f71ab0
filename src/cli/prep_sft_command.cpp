// `hpctrain prep sft`: option descriptions → prep::SftPrepOptions → the prep library (prep/sft_prep.hpp).
#include <fmt/format.h>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/prep/sft_prep.hpp"
#include "option_parsing.hpp"
#include "prep_options.hpp"

namespace hpctrain::cli {
namespace {

struct SftOptionText {
  std::vector<std::string> inputs;
  std::string validation_input, tokenizer, chat_template, template_kwargs = "{}", loss_on = "auto", packing = "none", output,
              compression;
  double collective_timeout = dist::kDefaultCollectiveTimeoutSeconds;
};

po::options_description sft_options(prep::SftPrepOptions& options, SftOptionText& text) {
  po::options_description data_options("Input");
  data_options.add_options()
      ("input", po::value(&text.inputs)->required()->multitoken(), "rows: .jsonl (messages, or prompt and completion: "
       "strings or message lists; optional tools and chat_template_kwargs) or .csv/.tsv (prompt and completion "
       "columns), optionally .gz; several files are concatenated in this order")
      ("validation-input", po::value(&text.validation_input), "a separate validation file (instead of --validation-fraction)")
      ("skip-invalid", po::bool_switch(&options.skip_invalid), "skip bad rows and report counts by reason");
  po::options_description chat_options("Tokenizer, template and loss");
  chat_options.add_options()
      ("tokenizer", po::value(&text.tokenizer)->required(), "Hugging Face folder: a byte-level BPE tokenizer.json, and "
       "tokenizer_config.json (special tokens; chat_template unless chat_template.jinja or --chat-template)")
      ("chat-template", po::value(&text.chat_template), "a Jinja chat template file instead of the folder's")
      ("template-kwargs", po::value(&text.template_kwargs)->default_value(text.template_kwargs),
       "a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'")
      ("loss-on", po::value(&text.loss_on)->default_value(text.loss_on), "assistant: the assistant turns' tokens; "
       "completion: the completion's tokens (prompt/completion rows); all: every token; auto: assistant for messages "
       "rows, completion for prompt/completion rows")
      ("max-length", po::value(&options.max_length)->default_value(options.max_length), "tokens kept per row, its "
       "start (TRL's max_length and keep_start; 0: no limit)")
      ("packing", po::value(&text.packing)->default_value(text.packing), "none: one row per example; bfd: whole "
       "examples packed into rows of up to --max-length tokens by best-fit-decreasing (as prep lm --packing bfd and "
       "TRL's packing_strategy=\"bfd\"), each keeping its loss mask, positions restarting and attention stopping at "
       "each example");
  po::options_description all;
  all.add(data_options).add(chat_options).add(corpus_output_options(
      {text.output, options.validation_fraction, options.seed, text.compression, options.overwrite, options.threads,
       options.memory_mb, text.collective_timeout},
      "share of the rows held out (seeded)"));
  return all;
}

void print_report(const prep::SftPrepOptions& options, const prep::SftPrepReport& report) {
  log::info("wrote {} ({}, at most {} tokens) in {}", options.output.string(),
            options.packing == prep::LmPacking::bfd ? "rows of whole examples, best-fit-decreasing" : "one row per example",
            report.max_length > 0 ? std::to_string(report.max_length) : "any", format_duration(report.seconds));
  std::string phases;
  for (const auto& [name, seconds] : report.phases) phases += fmt::format("{}{} {:.1f} s", phases.empty() ? "" : ", ", name, seconds);
  if (!phases.empty()) log::info("  phases (rank 0): {}", phases);
  log::info("  rows: {} conversations, {} prompt/completion pairs; loss on {}", report.conversations,
            report.prompt_completions, prep::to_string(options.loss_on));
  if (!report.mask_method.empty())
    log::info("  assistant turns found by {}; end-of-turn token {}", report.mask_method == "generation"
              ? "the template's {% generation %} blocks" : "rendering each conversation's prefixes",
              report.end_of_turn_id ? std::to_string(*report.end_of_turn_id) : "none (EOS only)");
  for (const auto& split : report.splits)
    log::info("  {}: {} examples -> {} rows, {} tokens, {} of them targets of the loss", split.name, split.examples,
              split.rows, split.tokens, split.target_tokens);
  if (report.truncated > 0) log::info("  {} rows were cut to {} tokens", report.truncated, report.max_length);
  if (report.dropped_after_truncation > 0)
    log::warning("{} rows lost every target to --max-length {} and were dropped (as TRL does)",
                 report.dropped_after_truncation, report.max_length);
  for (const auto& [reason, count] : report.skipped) log::warning("skipped {} rows: {}", count, reason);
  if (report.rows_with_invalid_utf8 > 0)
    log::warning("{} rows held invalid UTF-8; each invalid byte sequence was read as U+FFFD", report.rows_with_invalid_utf8);
}

}  // namespace

int prep_sft_command(const Args& args, const std::string& command_line, dist::Comm& comm) {
  prep::SftPrepOptions options;
  SftOptionText text;
  text.compression = std::string(data::to_string(options.compression));
  po::options_description all = sft_options(options, text);
  po::variables_map values;
  if (!parse_options(args, "hpctrain prep sft --input FILE... --tokenizer DIR --output FILE.h5 [options]", all, values)) return 0;
  for (const auto& input : text.inputs) options.inputs.emplace_back(input);
  options.validation_input = text.validation_input;
  options.tokenizer_dir = text.tokenizer;
  options.chat_template = text.chat_template;
  options.template_kwargs = nlohmann::ordered_json::parse(text.template_kwargs, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(options.template_kwargs.is_object(), "--template-kwargs: expected a JSON object, got '{}'", text.template_kwargs);
  options.loss_on = prep::parse_loss_on(text.loss_on);
  options.packing = prep::parse_lm_packing(text.packing);
  options.compression = data::parse_compression(text.compression);
  options.progress = values.count("no-progress") == 0;
  options.created_by = command_line;
  std::vector<std::filesystem::path> inputs = options.inputs;
  inputs.insert(inputs.end(), {options.validation_input, options.chat_template});
  options.output = check_corpus_output(text.output, options.tokenizer_dir, inputs, options.overwrite,
                                       text.collective_timeout, comm);
  const auto report = prep::prep_sft(options, comm);
  if (comm.rank() == 0) print_report(options, report);
  return 0;
}

}  // namespace hpctrain::cli
