// Shared Boost.Program_options plumbing for the subcommands (the only layer that sees Program_options).
#pragma once

#include <boost/program_options.hpp>

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include "hpctrain/models/nf4.hpp"
#include "hpctrain/optim/optimizer_options.hpp"

namespace hpctrain::cli {

namespace po = boost::program_options;

// The "Optimizer" flags (--optim and every optimizer's options), declared once for train and estimate-memory
// (defined in train_command.cpp).
po::options_description optimizer_group(optim::OptimizerOptions& options);

// QLoRA's flags (Note [Quantized base] in models/quantized_linear.hpp), declared once for train, eval, predict,
// generate and estimate-memory: --quantize-base nf4|fp4 [--double-quant|--no-double-quant] [--quant-blocksize 64]
// [--quantize-embeddings].
struct QuantizeBaseFlags {
  std::string type;  // "" = none
  bool double_quant = false, no_double_quant = false;
  bool embeddings = false;  // --quantize-embeddings
  int64_t blocksize = 64;
};
po::options_description quantize_base_group(QuantizeBaseFlags& flags);
// The options given (nullopt without --quantize-base). Error naming the option for an unknown type, a blocksize that
// is not a power of two, both --double-quant and --no-double-quant, or one of them (or --quant-blocksize) without
// --quantize-base.
[[nodiscard]] std::optional<models::Quant4Options> quantize_base_options(const QuantizeBaseFlags& flags);
// The "Loss" flag (--loss-chunk-tokens, Note [Chunked loss] in models/loss.hpp), declared once for train, eval,
// predict and estimate-memory (defined in train_command.cpp).
po::options_description loss_group(int64_t& chunk_tokens);

// ZeRO's flags, declared once for train, estimate-memory and bench predict (defined in train_command.cpp):
// --zero-stage 0|1|2|3 and --zero-reshard-after-forward true|false (stage 3's, Note [Unit gathers] in
// src/train/parallel/fully_sharded.cpp).
struct ZeroFlags {
  int stage = 0;
  std::string reshard_after_forward = "true";
};
po::options_description zero_group(ZeroFlags& flags);
// --zero-reshard-after-forward parsed (parse_on_off); --zero-stage is checked by train::parallel::parse_zero_stage.
[[nodiscard]] bool reshard_after_forward(const ZeroFlags& flags);

// Parses `args` against `options` (+ positional), handling --help and an optional --config FILE that holds the
// same keys (key = value lines). Returns false when help was printed (the caller returns 0).

// on|true|1 -> true, off|false|0 -> false; Error naming --flag otherwise (defined in train_command.cpp).
[[nodiscard]] bool parse_on_off(const std::string& text, const char* flag);

bool parse_options(const std::vector<std::string>& args, const std::string& usage, po::options_description& options,
                   po::variables_map& values, const po::positional_options_description* positional = nullptr);

}  // namespace hpctrain::cli
