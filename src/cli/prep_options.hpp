// Private to src/cli: the option group the corpus-scale preps share (prep lm, prep sft), declared once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "option_parsing.hpp"

namespace hpctrain::dist {
class Comm;
}

namespace hpctrain::cli {

// Where each "Output" option is stored.
struct CorpusOutputFields {
  std::string& output;
  double& validation_fraction;
  uint64_t& seed;
  std::string& compression;
  bool& overwrite;
  int& threads;
  int& memory_mb;
  double& collective_timeout;
};

// --output, --validation-fraction (`held_out` says of what), --seed, --compression, --overwrite, --threads,
// --memory-mb, --collective-timeout, --no-progress.
[[nodiscard]] po::options_description corpus_output_options(const CorpusOutputFields& fields, const char* held_out);

// The checks every corpus-scale prep makes before any work: the output is not an input (nor a file of the tokenizer
// folder) and exists only with --overwrite; --collective-timeout is sane and set on `comm`. Returns the output path.
[[nodiscard]] std::filesystem::path check_corpus_output(const std::string& output,
                                                        const std::filesystem::path& tokenizer_dir,
                                                        std::vector<std::filesystem::path> inputs, bool overwrite,
                                                        double collective_timeout, dist::Comm& comm);

}  // namespace hpctrain::cli
