// How much host memory this process may still allocate (for refusing a model before building it).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::core {

struct HostMemory {
  int64_t bytes = 0;   // what may still be allocated: the smaller of the two limits below
  std::string source;  // where the figure comes from, for messages ("MemAvailable in /proc/meminfo", ...)
};

// The smallest of: MemAvailable of /proc/meminfo; the room under this process's cgroup memory limits (v2
// memory.max - memory.current, v1 memory.limit_in_bytes - memory.usage_in_bytes, in its own cgroup and every
// parent: Slurm sets them per job); the room under the address-space limit (RLIMIT_AS, `ulimit -v`: the limit
// minus VmSize) and the data limit (RLIMIT_DATA, `ulimit -d`: minus VmData). Bytes; nullopt when none is readable.
[[nodiscard]] std::optional<HostMemory> available_host_memory();

// The room under one limit: limit - in_use, never negative; nullopt without a limit (absent, or one of the
// huge values that mean "unlimited": RLIM_INFINITY, cgroup v1's 2^63 - page).
[[nodiscard]] std::optional<int64_t> room_under_limit(std::optional<int64_t> limit, int64_t in_use);

// The folders to read a cgroup's memory files in, the process's own first, then each parent up to `mount`:
// `self_cgroup` is /proc/self/cgroup; `v2` takes its "0::/PATH" line, v1 the line whose controllers include
// "memory". Empty when the process has no such line.
[[nodiscard]] std::vector<std::string> cgroup_memory_dirs(const std::string& self_cgroup, const std::string& mount,
                                                          bool v2);

// True for an exception that reports a failed allocation: std::bad_alloc, or LibTorch's c10::Error
// "DefaultCPUAllocator: can't allocate memory"; not an hpctrain::Error (one that describes it already).
[[nodiscard]] bool is_allocation_failure(const std::exception& error);
// "ran out of memory (WHAT's first line); X are available after it (SOURCE)", for an error naming what was
// being done. Never throws.
[[nodiscard]] std::string describe_allocation_failure(const std::exception& error);

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
