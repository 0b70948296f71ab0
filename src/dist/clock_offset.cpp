// Clock offsets to rank 0 (dist/clock_offset.hpp): broadcast ping-pongs, the smallest round trip wins.
#include "hpctrain/dist/clock_offset.hpp"

#include "hpctrain/core/error.hpp"

namespace hpctrain::dist {

int64_t estimate_clock_offset(const std::vector<PingPong>& samples) {
  HPCTRAIN_CHECK(!samples.empty(), "estimate_clock_offset: no ping-pong measured");
  const PingPong* best = nullptr;
  for (const PingPong& sample : samples) {
    const int64_t round_trip = sample.received_ns - sample.sent_ns;
    HPCTRAIN_CHECK(round_trip >= 0, "estimate_clock_offset: a ping-pong arrived {} ns before it was sent", -round_trip);
    if (best == nullptr || round_trip < best->received_ns - best->sent_ns) best = &sample;
  }
  const int64_t midpoint = best->sent_ns + (best->received_ns - best->sent_ns) / 2;
  return best->remote_ns - midpoint;
}

namespace {

// One ping-pong between `rank` and rank 0: `rank` broadcasts a ping, rank 0 answers with its clock.
// Every rank takes part in both broadcasts (Comm has no point-to-point calls).
PingPong ping_pong(Comm& comm, int rank, int64_t (*clock_ns)()) {
  PingPong sample;
  int64_t word = 0;
  sample.sent_ns = clock_ns();
  comm.broadcast(&word, sizeof word, rank);
  if (comm.rank() == 0) word = clock_ns();
  comm.broadcast(&word, sizeof word, 0);
  sample.received_ns = clock_ns();
  sample.remote_ns = word;
  return sample;
}

}  // namespace

int64_t measure_clock_offset(Comm& comm, int rounds, int64_t (*clock_ns)()) {
  HPCTRAIN_CHECK(rounds >= 1, "measure_clock_offset: rounds must be >= 1, got {}", rounds);
  int64_t offset = 0;
  for (int rank = 1; rank < comm.world_size(); ++rank) {
    std::vector<PingPong> samples;
    for (int round = 0; round < rounds; ++round) samples.push_back(ping_pong(comm, rank, clock_ns));
    if (comm.rank() == rank) offset = estimate_clock_offset(samples);
  }
  return offset;
}

}  // namespace hpctrain::dist
