// `hpctrain prep sft`: conversations (JSONL `messages` rows) or prompt/completion pairs (strings or message lists)
// → one HDF5 file of token rows for supervised fine-tuning: task causal-lm with a per-token loss mask
// (docs/hdf5-format.md), rendered with the model's own chat template (chat/) and its byte-level BPE tokenizer,
// equal to TRL's SFTTrainer preprocessing (input_ids, and the assistant / completion mask folded into labels).
// Split, shuffled once and written atomically, in bounded memory and in parallel over MPI ranks, as `prep lm`.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/data/dataset_writer.hpp"
#include "hpctrain/prep/lm_prep.hpp"

namespace hpctrain::dist {
class Comm;
}

namespace hpctrain::prep {

// What the loss is over (the mask): auto is `assistant` for messages rows, `completion` for prompt/completion rows.
enum class LossOn : uint8_t { automatic, assistant, completion, all };
[[nodiscard]] LossOn parse_loss_on(const std::string& text);
[[nodiscard]] const char* to_string(LossOn loss_on);

// TRL's SFTConfig.max_length default.
inline constexpr int kDefaultSftMaxLength = 1024;

struct SftPrepOptions {
  std::vector<std::filesystem::path> inputs;  // JSONL (any row format), or CSV/TSV with prompt and completion columns
  std::filesystem::path validation_input;     // optional: a separate validation file
  std::filesystem::path tokenizer_dir;        // tokenizer.json + tokenizer_config.json (special tokens, chat template)
  std::filesystem::path chat_template;        // optional: a template file instead of the folder's
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // --template-kwargs
  std::filesystem::path output;
  LossOn loss_on = LossOn::automatic;
  int max_length = kDefaultSftMaxLength;      // tokens kept per example (its start, as TRL's keep_start); 0: no limit
  // none: one row per example; bfd: whole examples packed into rows of up to max_length tokens (Note [Best-fit-
  // decreasing rows] in src/prep/lm_packing.hpp), their boundaries and masks kept (Note [SFT rows are documents]).
  LmPacking packing = LmPacking::none;
  double validation_fraction = 0.0;
  uint64_t seed = 42;
  bool skip_invalid = false;
  bool overwrite = false;
  data::Compression compression = data::WriterOptions{}.compression;
  int threads = 0;      // per rank; 0: the node's hardware threads / ranks on the node
  int memory_mb = 2048;
  bool progress = true;
  std::string created_by;
};

struct SftSplitSummary {
  std::string name;
  int64_t examples = 0;
  int64_t rows = 0;           // = examples without packing
  int64_t tokens = 0;
  int64_t target_tokens = 0;  // tokens inside the loss mask
};

struct SftPrepReport {
  std::vector<SftSplitSummary> splits;
  std::map<std::string, int64_t> skipped;  // reason → rows skipped (--skip-invalid)
  int64_t conversations = 0;               // messages rows
  int64_t prompt_completions = 0;          // prompt/completion rows
  int64_t truncated = 0;                   // rows cut to max_length
  int64_t dropped_after_truncation = 0;    // rows whose targets were all cut off (dropped, as TRL)
  int64_t rows_with_invalid_utf8 = 0;
  int64_t end_of_turn_targets = 0;         // masked tokens that are the EOS or the template's end-of-turn token
  std::string mask_method;                 // how assistant turns were found (chat/chat_encoding.hpp)
  std::optional<int32_t> end_of_turn_id;   // the template's end-of-turn token, when it has one
  int32_t eos_id = 0;
  int max_length = 0;
  double seconds = 0.0;
  std::vector<std::pair<std::string, double>> phases;
};

// Runs the whole conversion. Throws hpctrain::Error naming file, line, row, field and reason on a bad row (unless
// skip_invalid); refuses, before any output, a folder without a chat template (for conversational rows), a row
// without a trainable token, and a dataset whose masks never hold the end-of-turn / EOS token.
SftPrepReport prep_sft(const SftPrepOptions& options);
// The same on every rank of `comm` (collective); a failure on any rank throws on every rank.
SftPrepReport prep_sft(const SftPrepOptions& options, dist::Comm& comm);

}  // namespace hpctrain::prep
