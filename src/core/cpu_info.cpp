// cpu_info.hpp: /proc/cpuinfo and OpenBLAS's core name.
#include "hpctrain/core/cpu_info.hpp"

#include <dlfcn.h>

#include <fstream>
#include <sstream>

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

}  // namespace hpctrain::core
