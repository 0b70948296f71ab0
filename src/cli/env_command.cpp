// `hpctrain env` (cf. `accelerate env`): the software and hardware this launch runs on — hpctrain, LibTorch's
// build, BLAS kernels, CPU capability, MPI, HDF5, Slurm — and one row per rank, gathered to rank 0.
#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "hpctrain/core/blas_kernels.hpp"
#include "hpctrain/core/cpu_info.hpp"
#include "hpctrain/data/hdf5_info.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/dist/mpi_info.hpp"
#include "hpctrain/train/build_info.hpp"
#include "hpctrain/train/device.hpp"
#include "hpctrain/train/threads.hpp"
#include "option_parsing.hpp"

extern char** environ;

namespace hpctrain::cli {
namespace {

constexpr const char* kEnvUsage = "hpctrain env [--json] [--threads N] [--device auto|cpu|cuda]   (mpirun -np N ok)";

struct EnvArgs {
  bool json = false;
  int threads = 0;
  std::string device = "auto";
};

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : "unknown";
}

int affinity_cpus() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
}

// This rank's row: after set_threads, so "threads" is what LibTorch will use.
nlohmann::json rank_row(const EnvArgs& a, dist::Comm& comm) {
  train::set_threads(a.threads > 0 ? a.threads : train::default_threads_per_rank(comm.local_size()));
  return {{"rank", comm.rank()}, {"local_rank", comm.local_rank()}, {"local_size", comm.local_size()},
          {"host", host_name()}, {"pid", static_cast<int64_t>(getpid())}, {"threads", train::torch_build_info().intra_op_threads},
          {"cpus", affinity_cpus()},
          {"device", train::select_device(a.device, comm).str()}};
}

// Collective: every rank's text, rank-ordered (lengths first, then the texts padded to the longest).
std::vector<std::string> gather_texts(dist::Comm& comm, const std::string& text) {
  const std::vector<int64_t> lengths = comm.allgather_value(static_cast<int64_t>(text.size()));
  const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
  std::string padded = text;
  padded.resize(longest);
  std::string all(longest * lengths.size(), '\0');
  comm.allgather(padded.data(), longest, all.data());
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) out.push_back(all.substr(r * longest, static_cast<std::size_t>(lengths[r])));
  return out;
}

nlohmann::json slurm_variables() {
  std::map<std::string, std::string> seen;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::size_t equals = text.find('=');
    if (text.rfind("SLURM_", 0) == 0 && equals != std::string::npos) seen[text.substr(0, equals)] = text.substr(equals + 1);
  }
  return seen;
}

nlohmann::json blas_json(const train::TorchBuildInfo& torch) {
  const char* fixed_from = std::getenv(core::kBlasFixedVariable);
  const char* coretype = std::getenv(core::kCoretypeVariable);
  return {{"libtorch_blas", torch.blas}, {"lapack", torch.lapack}, {"openblas_core", core::openblas_core()},
          {"openblas_coretype_env", coretype != nullptr ? coretype : ""},
          {"hpctrain_fixed_from", fixed_from != nullptr ? fixed_from : ""}};
}

nlohmann::json cpu_json() {
  const std::set<std::string> flags = core::cpu_flags();
  nlohmann::json capability;
  for (const auto& [name, present] : core::cpu_capabilities(flags)) capability[name] = present;
  return {{"model", core::cpu_model()}, {"logical_cpus", sysconf(_SC_NPROCESSORS_ONLN)}, {"capability", capability}};
}

nlohmann::json torch_json(const train::TorchBuildInfo& t) {
  return {{"version", t.version}, {"cuda", t.cuda_built}, {"cuda_runtime", t.cuda_runtime}, {"cuda_devices", t.cuda_devices},
          {"cudnn", t.cudnn}, {"onednn", t.onednn}, {"openmp", t.openmp}};
}

nlohmann::json mpi_json() {
  const dist::MpiLibraryInfo m = dist::mpi_library_info();
  return {{"library", m.library}, {"standard", fmt::format("{}.{}", m.standard_major, m.standard_minor)},
          {"cuda_aware_compiled", m.cuda_aware_compiled}, {"cuda_aware", m.cuda_aware_runtime}};
}

nlohmann::json environment_json(const nlohmann::json& ranks) {
  const train::TorchBuildInfo torch = train::torch_build_info();
  return {{"hpctrain", HPCTRAIN_VERSION}, {"libtorch", torch_json(torch)}, {"blas", blas_json(torch)}, {"cpu", cpu_json()},
          {"mpi", mpi_json()}, {"hdf5", {{"library", data::hdf5_library_version()}, {"headers", data::hdf5_header_version()}}},
          {"slurm", slurm_variables()}, {"world_size", ranks.size()}, {"ranks", ranks}};
}

std::string yes_no(bool value) { return value ? "yes" : "no"; }

std::string or_none(const std::string& text) { return text.empty() ? "none" : text; }

// Which OpenBLAS kernels run, and who chose them (Note [BLAS kernels]).
std::string blas_kernels_text(const nlohmann::json& b) {
  const std::string core = b["openblas_core"], fixed = b["hpctrain_fixed_from"], env = b["openblas_coretype_env"];
  if (core.empty()) return "the BLAS in use is not OpenBLAS";
  if (!fixed.empty()) return fmt::format("OpenBLAS kernels {} (hpctrain switched from {})", core, fixed);
  if (!env.empty()) return fmt::format("OpenBLAS kernels {} (OPENBLAS_CORETYPE={} set before hpctrain started)", core, env);
  return fmt::format("OpenBLAS kernels {} (OpenBLAS's own choice)", core);
}

void print_software(const nlohmann::json& e) {
  const auto& t = e["libtorch"];
  const auto& b = e["blas"];
  const auto& m = e["mpi"];
  std::printf("hpctrain        %s\n", e["hpctrain"].get<std::string>().c_str());
  std::printf("LibTorch        %s; CUDA %s%s; cuDNN %s; oneDNN %s; OpenMP %s\n", t["version"].get<std::string>().c_str(),
              t["cuda"].get<bool>() ? t["cuda_runtime"].get<std::string>().c_str() : "not available",
              t["cuda"].get<bool>() ? fmt::format(" ({} devices)", t["cuda_devices"].get<int>()).c_str() : "",
              or_none(t["cudnn"]).c_str(), or_none(t["onednn"]).c_str(), or_none(t["openmp"]).c_str());
  std::printf("BLAS            LibTorch built with %s (LAPACK %s); %s\n", or_none(b["libtorch_blas"]).c_str(),
              or_none(b["lapack"]).c_str(), blas_kernels_text(b).c_str());
  std::printf("MPI             %s (standard %s); CUDA-aware: %s%s\n", m["library"].get<std::string>().c_str(),
              m["standard"].get<std::string>().c_str(), yes_no(m["cuda_aware"]).c_str(),
              m["cuda_aware_compiled"].get<bool>() ? "" : " (library built without CUDA support)");
  std::printf("HDF5            %s (headers %s)\n", e["hdf5"]["library"].get<std::string>().c_str(),
              e["hdf5"]["headers"].get<std::string>().c_str());
}

void print_hardware(const nlohmann::json& e) {
  std::string present, absent;
  for (const auto& [name, has] : e["cpu"]["capability"].items()) (has.get<bool>() ? present : absent) += " " + name;
  std::printf("CPU             %s, %d logical CPUs\n", e["cpu"]["model"].get<std::string>().c_str(),
              e["cpu"]["logical_cpus"].get<int>());
  std::printf("  has          %s\n  lacks        %s\n", present.empty() ? " none" : present.c_str(),
              absent.empty() ? " none" : absent.c_str());
  if (e["slurm"].empty()) std::printf("Slurm           not under Slurm (no SLURM_* variables)\n");
  else std::printf("Slurm           %zu SLURM_* variables:\n", e["slurm"].size());
  for (const auto& [name, value] : e["slurm"].items()) std::printf("  %s=%s\n", name.c_str(), value.get<std::string>().c_str());
}

void print_ranks(const nlohmann::json& ranks) {
  std::printf("\n%-6s %-6s %-24s %8s %8s %8s  %s\n", "rank", "local", "host", "pid", "threads", "cpus", "device");
  for (const auto& r : ranks)
    std::printf("%-6d %-6s %-24s %8lld %8d %8d  %s\n", r["rank"].get<int>(),
                fmt::format("{}/{}", r["local_rank"].get<int>(), r["local_size"].get<int>()).c_str(),
                r["host"].get<std::string>().c_str(), static_cast<long long>(r["pid"].get<int64_t>()),
                r["threads"].get<int>(), r["cpus"].get<int>(), r["device"].get<std::string>().c_str());
}

}  // namespace

int env_command(const Args& args, dist::Comm& comm) {
  EnvArgs a;
  po::options_description options(kEnvUsage);
  options.add_options()
      ("json", po::bool_switch(&a.json), "print JSON instead of the table")
      ("threads", po::value(&a.threads)->default_value(0), "CPU threads per rank to report (0: cores on the node / ranks on it)")
      ("device", po::value(&a.device)->default_value(a.device), "auto | cpu | cuda: the device each rank would train on");
  po::variables_map values;
  if (!parse_options(args, kEnvUsage, options, values)) return 0;
  nlohmann::json row;
  dist::run_collectively(comm, "hpctrain env: this rank's row", [&] { row = rank_row(a, comm); });
  nlohmann::json ranks = nlohmann::json::array();
  for (const std::string& text : gather_texts(comm, row.dump())) ranks.push_back(nlohmann::json::parse(text));
  if (!comm.is_main_process()) return 0;
  const nlohmann::json e = environment_json(ranks);
  if (a.json) {
    std::printf("%s\n", e.dump(2).c_str());
    return 0;
  }
  print_software(e);
  print_hardware(e);
  print_ranks(ranks);
  return 0;
}

}  // namespace hpctrain::cli
