// The subcommands of the hpctrain executable. Each takes its arguments (without the command words)
// and returns the process exit code; errors propagate as exceptions to main().
#pragma once

#include <string>
#include <vector>

namespace hpctrain::dist {
class Comm;
}

namespace hpctrain::cli {

using Args = std::vector<std::string>;

int prep_text_command(const Args& args, const std::string& command_line);
int prep_images_command(const Args& args, const std::string& command_line);
int inspect_command(const Args& args);
// `hpctrain estimate-memory`: the memory of one training step per rank, estimated (and --measure'd).
int estimate_memory_command(const Args& args);
// A model folder (inspect dispatches here for folders).
int inspect_model(const std::string& dir, bool json);

// Distributed commands: every rank runs them (under mpirun or srun).
int eval_command(const Args& args, dist::Comm& comm);
int predict_command(const Args& args, dist::Comm& comm);
int train_command(const Args& args, dist::Comm& comm);

}  // namespace hpctrain::cli
