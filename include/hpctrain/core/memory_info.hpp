// How much host memory this process may still allocate (for refusing a model before building it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hpctrain::core {

struct HostMemory {
  int64_t bytes = 0;   // what may still be allocated: the smaller of the two limits below
  std::string source;  // where the figure comes from, for messages ("MemAvailable in /proc/meminfo", ...)
};

// min(MemAvailable of /proc/meminfo, cgroup memory limit - usage) in bytes (cgroup v2 memory.max /
// memory.current, else v1 memory.limit_in_bytes / memory.usage_in_bytes); nullopt when neither is readable.
[[nodiscard]] std::optional<HostMemory> available_host_memory();

// Parses /proc/meminfo text: MemAvailable in bytes, nullopt when absent.
[[nodiscard]] std::optional<int64_t> parse_mem_available(const std::string& meminfo);
// The value of a "Key: N kB" line of /proc text (meminfo, status) in bytes; nullopt when absent.
[[nodiscard]] std::optional<int64_t> parse_kb_field(const std::string& text, const std::string& key);

// This process's resident set size now (VmRSS) and its peak (VmHWM) since start or the last
// reset_peak_resident(), bytes, from /proc/self/status; nullopt when unreadable.
[[nodiscard]] std::optional<int64_t> resident_bytes();
[[nodiscard]] std::optional<int64_t> peak_resident_bytes();
// Sets the peak back to the current resident size (writes 5 to /proc/self/clear_refs); false when refused.
bool reset_peak_resident();

// A byte count for messages: "3.73 GiB (4000000000 bytes)".
[[nodiscard]] std::string format_bytes(int64_t bytes);

}  // namespace hpctrain::core
