// Clock offsets between ranks, for a timeline on one time axis: ping-pongs with rank 0 through Comm.
#pragma once

#include <cstdint>
#include <vector>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::dist {

// One ping-pong as seen by a rank: it sent at `sent_ns` (its clock), rank 0 read its clock at `remote_ns`,
// the answer arrived at `received_ns` (its clock again). Nanoseconds.
struct PingPong {
  int64_t sent_ns = 0;
  int64_t remote_ns = 0;
  int64_t received_ns = 0;
};

// Rank 0's clock minus this rank's, in ns (add it to a local time to get rank 0's), from the ping-pong with
// the smallest round trip (Cristian's estimate: rank 0 read its clock half-way through it; the error is at
// most half that round trip). Throws on an empty list or a negative round trip.
[[nodiscard]] int64_t estimate_clock_offset(const std::vector<PingPong>& samples);

// Collective: every rank's offset to rank 0 (0 on rank 0), measured with `rounds` ping-pongs per rank
// using `clock_ns` (nanoseconds). Ranks take turns; each ping-pong is two 8-byte broadcasts, so the cost is
// about 2 x rounds x (world_size - 1) broadcast latencies.
[[nodiscard]] int64_t measure_clock_offset(Comm& comm, int rounds, int64_t (*clock_ns)());

}  // namespace hpctrain::dist
