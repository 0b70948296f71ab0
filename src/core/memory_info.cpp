// Available host memory from /proc/meminfo, the cgroup limits and the rlimits (memory_info.hpp).
#include "hpctrain/core/memory_info.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "hpctrain/core/error.hpp"

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
std::optional<int64_t> read_number(const std::string& path) {
  const auto text = read_small_file(path.c_str());
  if (!text) return std::nullopt;
  std::istringstream in(*text);
  int64_t value = 0;
  if (!(in >> value) || value < 0) return std::nullopt;
  return value;
}

// Room left under a cgroup's memory limit, nullopt without a limit.
std::optional<int64_t> cgroup_room(const std::string& limit_path, const std::string& usage_path) {
  return room_under_limit(read_number(limit_path), read_number(usage_path).value_or(0));
}

// Room under an rlimit of this process, `in_use_key` the /proc/self/status line that the kernel counts against it.
std::optional<int64_t> rlimit_room(int resource, const char* in_use_key, int64_t* limit_bytes, int64_t* in_use) {
  rlimit limit{};
  if (getrlimit(resource, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const auto status = read_small_file("/proc/self/status");
  *limit_bytes = static_cast<int64_t>(std::min<rlim_t>(limit.rlim_cur, INT64_MAX));
  *in_use = status ? parse_kb_field(*status, in_use_key).value_or(0) : 0;
  return room_under_limit(*limit_bytes, *in_use);
}

}  // namespace

std::optional<int64_t> room_under_limit(std::optional<int64_t> limit, int64_t in_use) {
  if (!limit || *limit >= (int64_t{1} << 60)) return std::nullopt;  // "unlimited" is a huge number (v1, rlimits)
  return std::max<int64_t>(0, *limit - in_use);
}

std::vector<std::string> cgroup_memory_dirs(const std::string& self_cgroup, const std::string& mount, bool v2) {
  std::istringstream in(self_cgroup);
  std::string line;
  while (std::getline(in, line)) {  // "ID:CONTROLLERS:PATH"; v2 is "0::PATH"
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? std::string::npos : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    const bool wanted = v2 ? line.compare(0, first, "0") == 0 && controllers == ",,"
                           : controllers.find(",memory,") != std::string::npos;
    if (!wanted) continue;
    std::string path = line.substr(second + 1);
    std::vector<std::string> dirs;
    while (!path.empty() && path != "/") {
      dirs.push_back(mount + path);
      path.erase(path.rfind('/'));
    }
    dirs.push_back(mount);
    return dirs;
  }
  return {};
}

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
  auto consider = [&](std::optional<int64_t> bytes, const std::string& source) {
    if (bytes && (!best || *bytes < best->bytes)) best = HostMemory{*bytes, source};
  };
  if (const auto meminfo = read_small_file("/proc/meminfo"))
    consider(parse_mem_available(*meminfo), "MemAvailable in /proc/meminfo");
  const std::string self = read_small_file("/proc/self/cgroup").value_or("");
  // A folder that does not exist here (the path is outside this mount's namespace) reads as no limit.
  for (const std::string& dir : cgroup_memory_dirs(self, "/sys/fs/cgroup", /*v2=*/true))
    consider(cgroup_room(dir + "/memory.max", dir + "/memory.current"), "the cgroup limit " + dir + "/memory.max");
  for (const std::string& dir : cgroup_memory_dirs(self, "/sys/fs/cgroup/memory", /*v2=*/false))
    consider(cgroup_room(dir + "/memory.limit_in_bytes", dir + "/memory.usage_in_bytes"),
             "the cgroup limit " + dir + "/memory.limit_in_bytes");
  // Without a cgroup line (no /proc/self/cgroup): the mounts' own files, as before.
  if (self.empty()) {
    consider(cgroup_room("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"), "the cgroup memory.max limit");
    consider(cgroup_room("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
             "the cgroup memory.limit_in_bytes limit");
  }
  int64_t limit = 0, in_use = 0;
  const auto as_room = rlimit_room(RLIMIT_AS, "VmSize:", &limit, &in_use);
  if (as_room)
    consider(as_room, fmt::format("the address-space limit RLIMIT_AS (ulimit -v) {} minus VmSize {} in use",
                                  format_bytes(limit), format_bytes(in_use)));
  const auto data_room = rlimit_room(RLIMIT_DATA, "VmData:", &limit, &in_use);
  if (data_room)
    consider(data_room, fmt::format("the data limit RLIMIT_DATA (ulimit -d) {} minus VmData {} in use",
                                    format_bytes(limit), format_bytes(in_use)));
  return best;
}

bool is_allocation_failure(const std::exception& error) {
  if (dynamic_cast<const std::bad_alloc*>(&error) != nullptr) return true;
  if (dynamic_cast<const OutOfMemoryError*>(&error) != nullptr) return true;
  if (dynamic_cast<const Error*>(&error) != nullptr) return false;  // ours: already says what ran out
  return std::strstr(error.what(), "can't allocate memory") != nullptr;  // c10::Error of DefaultCPUAllocator
}

std::string describe_allocation_failure(const std::exception& error) {
  try {  // the failed allocation is freed by now, but what is left may be little
    const std::string what = error.what();
    const std::string first_line = what.substr(0, what.find('\n'));  // LibTorch appends a backtrace
    const auto available = available_host_memory();
    if (!available) return fmt::format("ran out of memory ({})", first_line);
    return fmt::format("ran out of memory ({}); {} are available after it ({})", first_line,
                       format_bytes(available->bytes), available->source);
  } catch (const std::exception&) {
    return "out of memory";  // short enough for the string's own buffer: allocates nothing
  }
}

std::string format_bytes(int64_t bytes) {
  return fmt::format("{:.2f} GiB ({} bytes)", static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30),
                     bytes);
}

}  // namespace hpctrain::core
