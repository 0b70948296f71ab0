// `hpctrain prep lm`: CSV/TSV/JSONL documents → one HDF5 file of token rows for a causal language model (task
// causal-lm, docs/hdf5-format.md), tokenized with a byte-level BPE tokenizer (GPT-2, Llama-3, Qwen2), packed into
// rows of --block-size tokens (Note [Packing rows] in src/prep/lm_packing.hpp), into rows of whole documents by
// best-fit-decreasing (Note [Best-fit-decreasing rows]) or one row per document, split, shuffled once and written
// atomically; in bounded memory and in parallel over MPI ranks, as `prep text`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/data/dataset_writer.hpp"

namespace hpctrain::dist {
class Comm;
}

namespace hpctrain::prep {

// The default --block-size (and --max-length of the other packings): run_clm's, min(1024, model_max_length).
inline constexpr int kDefaultBlockSize = 1024;

// How documents become rows (--packing). wrapped ("group"): concatenated and cut into rows of block_size, as
// run_clm's group_texts and TRL's "wrapped"; bfd: whole documents (cut to max_length) packed into rows of up to
// max_length tokens by best-fit-decreasing, with their boundaries stored, as TRL's "bfd"; bfd_split: the same, the
// documents longer than a row split into pieces of max_length first (TRL's "bfd_split"); none: one row per document.
enum class LmPacking { wrapped, bfd, bfd_split, none };
[[nodiscard]] const char* to_string(LmPacking packing);
// The --packing spelling: wrapped (or group, its former name), bfd, bfd_split, none; anything else throws, naming
// the option and the accepted values.
[[nodiscard]] LmPacking parse_lm_packing(const std::string& text);
// Rows that keep their documents' boundaries (Note [Document boundaries] in src/data/examples.cpp).
[[nodiscard]] constexpr bool packs_documents(LmPacking packing) {
  return packing == LmPacking::bfd || packing == LmPacking::bfd_split;
}

struct LmPrepOptions {
  std::vector<std::filesystem::path> inputs;  // the training documents, concatenated in this order
  std::filesystem::path validation_input;     // optional: a separate validation file
  std::filesystem::path tokenizer_dir;        // Hugging Face folder: tokenizer.json + tokenizer_config.json (eos_token)
  std::filesystem::path output;               // the .h5 file
  std::string text_field = "text";
  LmPacking packing = LmPacking::wrapped;
  int block_size = 0;                         // wrapped: tokens per row; 0: kDefaultBlockSize capped by model_max_length
  int max_length = 0;                         // bfd, bfd_split: tokens per row; none: ids kept per document; 0: as block_size
  double validation_fraction = 0.0;           // share of the documents (not rows) held out, seeded
  uint64_t seed = 42;
  bool skip_invalid = false;
  bool overwrite = false;
  data::Compression compression = data::WriterOptions{}.compression;
  int threads = 0;                            // per rank; 0: the node's hardware threads / ranks on the node
  int memory_mb = 2048;                       // per rank: the plan, documents and rows in memory
  bool progress = true;
  std::string created_by;                     // recorded in the file (the command line)
};

struct LmSplitSummary {
  std::string name;
  int64_t documents = 0;
  int64_t document_tokens = 0;  // of the documents, EOS included, before packing or cutting
  int64_t rows = 0;
  int64_t tokens = 0;           // in the rows written
  int64_t segments = 0;         // bfd_split: the pieces packed (documents and the pieces of the long ones); else 0
};

struct LmPrepReport {
  std::vector<LmSplitSummary> splits;
  std::map<std::string, int64_t> skipped;  // reason → rows skipped (--skip-invalid)
  int64_t rows_with_invalid_utf8 = 0;      // read with each invalid sequence as U+FFFD
  int64_t truncated = 0;                   // --packing none and bfd: documents cut to max_length
  int row_length = 0;                      // block size (wrapped), else max_length
  double seconds = 0.0;
  std::vector<std::pair<std::string, double>> phases;  // wall seconds of each phase on this rank, in order
};

// Runs the whole conversion. Throws hpctrain::Error naming file, line and reason on a bad row (unless
// skip_invalid); the output file appears only when everything succeeded.
LmPrepReport prep_lm(const LmPrepOptions& options);
// The same on every rank of `comm` (collective): each rank tokenizes its part of the inputs, rank 0 packs and
// writes (its report has the splits' rows); a failure on any rank throws on every rank.
LmPrepReport prep_lm(const LmPrepOptions& options, dist::Comm& comm);

}  // namespace hpctrain::prep
