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

// Distributed too: under mpirun every rank tokenizes its part of the inputs (Note [Prep at corpus scale]).
int prep_text_command(const Args& args, const std::string& command_line, dist::Comm& comm);
int prep_lm_command(const Args& args, const std::string& command_line, dist::Comm& comm);
int prep_sft_command(const Args& args, const std::string& command_line, dist::Comm& comm);
int prep_images_command(const Args& args, const std::string& command_line);
int inspect_command(const Args& args);
// `hpctrain estimate-memory`: the memory of one training step per rank, estimated (and --measure'd).
// Distributed with --measure (main's is_distributed): the step runs on every launched rank, rank 0 prints.
int estimate_memory_command(const Args& args, dist::Comm& comm);
// A model folder (inspect dispatches here for folders).
int inspect_model(const std::string& dir, bool json);

// Distributed commands: every rank runs them (under mpirun or srun).
int eval_command(const Args& args, dist::Comm& comm);
int predict_command(const Args& args, dist::Comm& comm);
int train_command(const Args& args, dist::Comm& comm);
// `hpctrain env`: software, hardware and one row per rank, printed by rank 0.
int env_command(const Args& args, dist::Comm& comm);
// `hpctrain bench comm`: allreduce timings by message size on this launch and the fitted ring α-β.
int bench_comm_command(const Args& args, dist::Comm& comm);
// `hpctrain bench predict`: the scaling model (train/scaling_model.hpp); single-process.
int bench_predict_command(const Args& args);
// `hpctrain chat-template`: what a tokenizer folder's chat template renders for a conversation (as transformers).
int chat_template_command(const Args& args);
// `hpctrain generate`: a causal LM continues a prompt; one process (refused under a launcher of several).
int generate_command(const Args& args);

}  // namespace hpctrain::cli
