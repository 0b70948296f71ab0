// `hpctrain bench comm`: allreduce time by message size on the current launch, and the α-β model fitted to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpctrain/dist/comm.hpp"

namespace hpctrain::dist {

// One message size's timings: every repetition timed as the slowest rank's (the job's) time.
struct AllreduceTiming {
  int64_t bytes = 0;
  double median_s = 0, min_s = 0, max_s = 0;  // over the repetitions
  int repetitions = 0;
};

// Note [Ring alpha-beta]: a ring allreduce of n bytes over p ranks (reduce-scatter then allgather) takes
// 2 (p - 1) steps, each one message of n / p bytes: t = 2 (p - 1) α + 2 (p - 1) / p · n · β, with α the
// per-message latency and β the seconds per byte of one link. The comm bench fits this to its timings; the
// scaling predictor (train/scaling_model.hpp) evaluates it for other p.
struct AlphaBeta {
  double alpha_s = 0;           // seconds per message
  double beta_s_per_byte = 0;   // seconds per byte on one link
};

// Pure: sizes from `min_bytes` to `max_bytes` (both > 0), multiplying by `factor` (2 or 4), float-aligned.
std::vector<int64_t> message_sizes(int64_t min_bytes, int64_t max_bytes, int factor);

// Collective: times allreduce(sum) of float32 buffers of each size, `warmup` untimed then `repetitions`
// timed runs, each starting from a barrier. Every rank gets the same result.
std::vector<AllreduceTiming> time_allreduce(Comm& comm, const std::vector<int64_t>& sizes, int warmup, int repetitions);

// Pure: the ring's t = 2 (p - 1) α + 2 (p - 1) / p · n · β fitted to the medians by least squares on relative
// errors (each point weighted 1 / t², so the small messages set α and the large ones β). For p = 1 the
// ring has no steps; the fit is then t = α + n β (the local copy, reported as such). Needs 2+ distinct sizes.
// α, β >= 0: where the free fit's intercept (slope) comes out negative, it is 0 and the slope (intercept) is
// fitted alone (e.g. a cache cliff between the sizes makes the large ones slower per byte than a line allows).
AlphaBeta fit_ring_alpha_beta(const std::vector<AllreduceTiming>& timings, int world_size);

// Pure: the ring model's time for n bytes over p ranks (0 for p = 1).
double ring_allreduce_seconds(const AlphaBeta& model, int64_t bytes, int world_size);

}  // namespace hpctrain::dist
