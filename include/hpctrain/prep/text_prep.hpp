// `hpctrain prep text`: a CSV/TSV/JSONL text-classification dataset → one HDF5 file (schema v1),
// tokenized with a Hugging Face WordPiece tokenizer, split, shuffled once, written atomically; in bounded
// memory (--memory-mb) and in parallel over MPI ranks (Note [Prep at corpus scale] in src/prep/text_prep.cpp).
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

struct TextPrepOptions {
  std::filesystem::path input;             // training rows (and validation rows when validation_fraction > 0)
  std::filesystem::path validation_input;  // optional: a separate validation file
  std::filesystem::path test_input;        // optional: a test split
  std::filesystem::path tokenizer_dir;     // Hugging Face folder: vocab.txt (+ tokenizer_config.json) or tokenizer.json
  std::filesystem::path output;            // the .h5 file
  std::string text_field = "text";
  std::string text_pair_field;             // empty: single sentences
  std::string label_field = "label";
  std::vector<std::string> labels;         // forced label order; empty: sorted unique values (numerically if all integers)
  int max_length = 0;                      // tokens incl. [CLS]/[SEP]; 0: the tokenizer's model_max_length
  double validation_fraction = 0.0;        // stratified by label; 0 with no validation_input: no validation split
  uint64_t seed = 42;
  bool skip_invalid = false;
  bool overwrite = false;
  data::Compression compression = data::WriterOptions{}.compression;
  int threads = 0;                         // per rank; 0: the node's hardware threads / ranks on the node
  int memory_mb = 2048;                    // per rank: the plan, rows and tokens in memory (Note [Prep at corpus scale])
  bool progress = true;
  std::string created_by;                  // recorded in the file (the command line)
};

struct SplitSummary {
  std::string name;
  int64_t examples = 0;
  int64_t tokens = 0;
  std::vector<int64_t> label_counts;  // by label id
};

struct TextPrepReport {
  std::vector<std::string> label_names;
  std::vector<SplitSummary> splits;
  std::map<std::string, int64_t> skipped;  // reason → rows skipped (--skip-invalid)
  int64_t rows_with_invalid_utf8 = 0;      // invalid bytes replaced by U+FFFD, then dropped by the tokenizer
  int64_t truncated = 0;                   // examples cut to max_length
  int max_length = 0;
  double seconds = 0.0;
  std::vector<std::pair<std::string, double>> phases;  // wall seconds of each pass on this rank, in order
  int64_t input_bytes = 0;
};

// Runs the whole conversion. Throws hpctrain::Error naming file, line and reason on a bad row
// (unless skip_invalid); the output file appears only when everything succeeded.
TextPrepReport prep_text(const TextPrepOptions& options);
// The same on every rank of `comm` (collective): each rank tokenizes its part of the inputs, rank 0 writes
// the file (its report has the splits' token counts); a failure on any rank throws on every rank.
TextPrepReport prep_text(const TextPrepOptions& options, dist::Comm& comm);

}  // namespace hpctrain::prep
