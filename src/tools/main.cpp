// hpctrain: data-parallel training of Hugging Face models over MPI. main() is a list of steps:
// pick the subcommand, run it, and turn any error into one clear message and a non-zero exit.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "hpctrain/core/blas_kernels.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/host_allocator.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/memory_info.hpp"
#include "hpctrain/dist/comm.hpp"

namespace {

constexpr const char* kUsage = R"(hpctrain — data-parallel training of Hugging Face models over MPI

usage: hpctrain <command> [options]      (hpctrain <command> --help for its options)

commands:
  prep text     tokenize a CSV/TSV/JSONL text-classification dataset into one HDF5 file
  prep lm       tokenize CSV/TSV/JSONL documents into token rows for a causal LM (one HDF5 file)
  prep sft      render conversations with the model's chat template into token rows with a loss mask (SFT)
  prep images   convert MNIST-style IDX images into one HDF5 file
  chat-template print what a tokenizer's chat template renders for a conversation (as transformers)
  inspect       summarize a dataset file (.h5) or a Hugging Face model folder
  estimate-memory  bytes per rank of one training step (parameters, gradients, optimizer, activations)
  train         data-parallel training with checkpoints and resume                 (mpirun -np N ok)
  eval          loss, accuracy, macro-F1 and confusion matrix of a model on a split   (mpirun -np N ok)
  predict       per-example predictions of a model on a split, as JSONL              (mpirun -np N ok)
  generate      continue a text prompt with a causal LM (greedy or sampled, KV cache) (one process)
  env           versions, build, CPU, MPI, HDF5, Slurm, and one row per rank           (mpirun -np N ok)
  bench comm    allreduce latency and bandwidth by message size, fitted alpha-beta    (mpirun -np N)
  bench predict step time and scaling efficiency on nodes x GPUs from one rank's step
  version       print the version
)";

std::string join_command_line(int argc, char** argv) {
  std::string line = "hpctrain";
  for (int i = 1; i < argc; ++i) line += std::string(" ") + argv[i];
  return line;
}

bool is_distributed(const std::vector<std::string>& words) {
  const std::string& command = words[0];
  if (command == "bench") return words.size() > 1 && words[1] == "comm";
  if (command == "prep")  // Note [Prep at corpus scale]
    return words.size() > 1 && (words[1] == "text" || words[1] == "lm" || words[1] == "sft");
  if (command == "estimate-memory")  // --measure runs the step on the launched ranks (Note [Measured ZeRO step])
    return std::find(words.begin(), words.end(), "--measure") != words.end();
  return command == "eval" || command == "predict" || command == "train" || command == "env";
}

// The message main() reports: an allocation failure (bare "std::bad_alloc") also says how much memory is
// available and which limit leaves that little (RLIMIT_AS, a cgroup, MemAvailable).
std::string message_of(const std::exception& e) {
  return hpctrain::core::is_allocation_failure(e) ? hpctrain::core::describe_allocation_failure(e) : e.what();
}

// Distributed commands run on every rank of the MPI job.
// Note [Errors end the job]: library code throws; an exception on any rank is reported here with the
// rank, and MPI_Abort ends every rank of the job, so no rank waits forever in a collective.
int run_distributed(int argc, char** argv, const std::vector<std::string>& words) {
  const std::string command_line = join_command_line(argc, argv);
  hpctrain::dist::MpiRuntime runtime(&argc, &argv);
  hpctrain::dist::Comm& comm = runtime.world();
  hpctrain::log::Context context;
  context.rank = comm.rank();
  context.world_size = comm.world_size();
  hpctrain::log::set_context(context);
  const hpctrain::cli::Args rest(words.begin() + 1, words.end());
  try {
    if (words[0] == "prep" && words[1] == "lm") return hpctrain::cli::prep_lm_command({rest.begin() + 1, rest.end()}, command_line, comm);
    if (words[0] == "prep" && words[1] == "sft") return hpctrain::cli::prep_sft_command({rest.begin() + 1, rest.end()}, command_line, comm);
    if (words[0] == "prep") return hpctrain::cli::prep_text_command({rest.begin() + 1, rest.end()}, command_line, comm);
    if (words[0] == "eval") return hpctrain::cli::eval_command(rest, comm);
    if (words[0] == "train") return hpctrain::cli::train_command(rest, comm);
    if (words[0] == "estimate-memory") return hpctrain::cli::estimate_memory_command(rest, comm);
    if (words[0] == "env") return hpctrain::cli::env_command(rest, comm);
    if (words[0] == "bench") return hpctrain::cli::bench_comm_command(hpctrain::cli::Args(rest.begin() + 1, rest.end()), comm);
    return hpctrain::cli::predict_command(rest, comm);
  } catch (const std::exception& e) {
    hpctrain::log::error("{}", message_of(e));
    if (comm.world_size() > 1) comm.abort(1);
    return 1;
  }
}

int dispatch(const std::vector<std::string>& words, const std::string& command_line) {
  using namespace hpctrain::cli;
  if (words.empty() || words[0] == "help" || words[0] == "--help" || words[0] == "-h") {
    std::fputs(kUsage, words.empty() ? stderr : stdout);
    return words.empty() ? 2 : 0;
  }
  const std::string& command = words[0];
  const Args rest(words.begin() + 1, words.end());
  if (command == "version" || command == "--version") {
    std::printf("hpctrain %s\n", HPCTRAIN_VERSION);
    return 0;
  }
  if (command == "prep") {
    const std::string kind = rest.empty() ? "" : rest[0];
    const Args options(rest.empty() ? rest.end() : rest.begin() + 1, rest.end());
    if (kind == "images") return prep_images_command(options, command_line);
    hpctrain::fail("'hpctrain prep' needs a kind: text, lm, sft or images (got '{}')", kind);
  }
  if (command == "inspect") return inspect_command(rest);
  if (command == "estimate-memory") return estimate_memory_command(rest, *hpctrain::dist::make_single_process_comm());
  if (command == "generate") return generate_command(rest);
  if (command == "chat-template") return chat_template_command(rest);
  if (command == "bench") {  // bench comm is distributed (run_distributed)
    const Args options(rest.empty() ? rest.end() : rest.begin() + 1, rest.end());
    if (!rest.empty() && rest[0] == "predict") return bench_predict_command(options);
    hpctrain::fail("'hpctrain bench' needs a kind: comm or predict (got '{}')", rest.empty() ? "" : rest[0]);
  }
  hpctrain::fail("unknown command '{}'\n{}", command, kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::core::fix_blas_kernels(argv);  // Note [BLAS kernels]: may re-exec, so before MPI and LibTorch threads
  hpctrain::core::tune_host_allocator();  // Note [Host allocator]
  const std::vector<std::string> words(argv + 1, argv + argc);
  if (!words.empty() && is_distributed(words)) return run_distributed(argc, argv, words);
  try {
    return dispatch(words, join_command_line(argc, argv));
  } catch (const std::exception& e) {
    // Single-process commands: report once and exit non-zero (see Note [Errors end the job]).
    hpctrain::log::error("{}", message_of(e));
    return 1;
  }
}
