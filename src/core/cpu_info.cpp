// cpu_info.hpp: /proc/cpuinfo, OpenBLAS's core name, the CPUs this process may use.
#include "hpctrain/core/cpu_info.hpp"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

namespace hpctrain::core {
namespace {

// The value of the first "KEY : value" line of /proc/cpuinfo whose key is `key`, or "".
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos || line.rfind(key, 0) != 0) continue;
    const std::string name = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    if (name != key) continue;
    const std::size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

std::set<std::string> cpu_flags() {
  std::istringstream words(cpuinfo_field("flags"));
  std::set<std::string> flags;
  for (std::string word; words >> word;) flags.insert(word);
  return flags;
}

std::string cpu_model() {
  const std::string model = cpuinfo_field("model name");
  return model.empty() ? "unknown" : model;
}

std::string openblas_core() {
  using CoreName = char* (*)();
  auto* get = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = get != nullptr ? get() : nullptr;
  return name != nullptr ? name : "";
}

std::vector<std::pair<std::string, bool>> cpu_capabilities(const std::set<std::string>& flags) {
  std::vector<std::pair<std::string, bool>> out;
  for (const char* flag : {"avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile",
                           "amx_bf16", "amx_int8"})
    out.emplace_back(flag, flags.count(flag) > 0);
  return out;
}

std::string capability_summary(const std::set<std::string>& flags) {
  std::string out;
  for (const auto& [name, present] : cpu_capabilities(flags))
    if (present) out += (out.empty() ? "" : " ") + name;
  return out.empty() ? "none" : out;
}

int affinity_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Note [Too many threads]
// Each rank runs --threads intra-op threads (OpenMP, which spins while it waits). More threads than the
// cores a rank can use do not share them politely: on 2 cores, --threads 64 runs a step 55x slower, with
// no error. The cores a rank can use are its affinity mask's CPUs ÷ the ranks on the node (the mask of a
// rank mpirun binds to its own cores is smaller already, so this errs low; hence the factor of two before
// warning). The warning is printed once, by rank 0 (log::warning), for its node.
std::string thread_oversubscription(const std::string& option, int threads, int cpus, int local_size) {
  const int ranks = std::max(1, local_size);
  const int usable = std::max(1, cpus / ranks);
  if (threads <= 2 * usable) return "";
  return fmt::format(
      "{} {}: more than twice the {} core(s) each rank can use ({} CPU(s) this process may run on ÷ {} "
      "rank(s) on this node); the threads will fight over the cores and run many times slower\n  hint: "
      "use {} {} (or leave it out: cores ÷ ranks on the node)",
      option, threads, usable, cpus, ranks, option, usable);
}

}  // namespace hpctrain::core
