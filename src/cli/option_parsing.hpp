// Shared Boost.Program_options plumbing for the subcommands (the only layer that sees Program_options).
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "hpctrain/optim/optimizer_options.hpp"

namespace hpctrain::cli {

namespace po = boost::program_options;

// The "Optimizer" flags (--optim and every optimizer's options), declared once for train and estimate-memory
// (defined in train_command.cpp).
po::options_description optimizer_group(optim::OptimizerOptions& options);

// Parses `args` against `options` (+ positional), handling --help and an optional --config FILE that holds the
// same keys (key = value lines). Returns false when help was printed (the caller returns 0).

// on|true|1 -> true, off|false|0 -> false; Error naming --flag otherwise (defined in train_command.cpp).
[[nodiscard]] bool parse_on_off(const std::string& text, const char* flag);

bool parse_options(const std::vector<std::string>& args, const std::string& usage, po::options_description& options,
                   po::variables_map& values, const po::positional_options_description* positional = nullptr);

}  // namespace hpctrain::cli
