// Available host memory from /proc/meminfo and the cgroup limits (memory_info.hpp).
#include "hpctrain/core/memory_info.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace hpctrain::core {
namespace {

std::optional<std::string> read_small_file(const char* path) {
  std::ifstream in(path);
  if (!in.good()) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A file holding one integer; nullopt when absent or not a number ("max" means no limit).
std::optional<int64_t> read_number(const char* path) {
  const auto text = read_small_file(path);
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  int64_t value = 0;
  if (!(in >> value) || value < 0) return std::nullopt;
  return value;
}

// Room left under the cgroup's memory limit, nullopt without a limit. v1 reports "no limit" as a huge number.
std::optional<int64_t> cgroup_room(const char* limit_path, const char* usage_path) {
  const auto limit = read_number(limit_path);
  if (!limit || *limit >= (int64_t{1} << 60)) return std::nullopt;
  return std::max<int64_t>(0, *limit - read_number(usage_path).value_or(0));
}

}  // namespace

std::optional<int64_t> parse_kb_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {  // line by line: /proc/self/status also has text fields
    std::istringstream fields(line);
    std::string name;
    int64_t value = 0;
    if (fields >> name >> value && name == key) return value * 1024;  // the kernel reports kB
  }
  return std::nullopt;
}

std::optional<int64_t> parse_mem_available(const std::string& meminfo) { return parse_kb_field(meminfo, "MemAvailable:"); }

std::optional<int64_t> resident_bytes() {
  const auto status = read_small_file("/proc/self/status");
  return status ? parse_kb_field(*status, "VmRSS:") : std::nullopt;
}

std::optional<int64_t> peak_resident_bytes() {
  const auto status = read_small_file("/proc/self/status");
  return status ? parse_kb_field(*status, "VmHWM:") : std::nullopt;
}

bool reset_peak_resident() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";  // "reset the peak resident set size" (Documentation/filesystems/proc.rst)
  out.flush();
  return out.good();
}

std::optional<HostMemory> available_host_memory() {
  std::optional<HostMemory> best;
  auto consider = [&](std::optional<int64_t> bytes, const char* source) {
    if (bytes && (!best || *bytes < best->bytes)) best = HostMemory{*bytes, source};
  };
  if (const auto meminfo = read_small_file("/proc/meminfo"))
    consider(parse_mem_available(*meminfo), "MemAvailable in /proc/meminfo");
  consider(cgroup_room("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"), "the cgroup memory.max limit");
  consider(cgroup_room("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
           "the cgroup memory.limit_in_bytes limit");
  return best;
}

std::string format_bytes(int64_t bytes) {
  return fmt::format("{:.2f} GiB ({} bytes)", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30),
                     bytes);
}

}  // namespace hpctrain::core
