// zero_terms (zero_memory_estimate.hpp): gradient, bucket and optimizer-state bytes per rank under ZeRO.
#include "zero_memory_estimate.hpp"

#include <algorithm>
#include <functional>
#include <numeric>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/buckets.hpp"
#include "hpctrain/dist/zero_slices.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/parallel/strategy.hpp"
#include "hpctrain/train/parallel/units.hpp"

namespace hpctrain::train::detail {

// Note [ZeRO memory arithmetic]
// What one rank holds at --zero-stage S over N ranks (Note [ZeRO slices] in src/dist/zero_slices.cpp), for the
// gradient buckets of stage 0 (dist::assign_buckets at the --first-bucket-mb / --bucket-mb caps), each padded
// to N slices of S_b elements as the reducer pads them (dist::zero_bucket_layout with optim::segment_alignment:
// 256 for the parameters 8-bit AdamW quantizes, whose segments must hold whole blocks, else 1):
// - optimizer state: the rank's segments only. State is elementwise (AdamW, SGD's momentum, 8-bit AdamW's
//   codes and per-block absmax), so a bucket's share is its stage-0 state x S_b / elements: 1/N plus the
//   padding, which is at most N x alignment elements per bucket (a few KiB: "padding is small"). The
//   largest rank holds no more than that. Adafactor's factored moments need whole matrices: refused.
// - stage 1: backward fills the full buckets as in stage 0 (4 bytes per parameter: the gradients), and the
//   reduce-scatter writes the rank's averaged slice into a tensor of its own: 4 x N S_b / N more per bucket.
// - stage 2: the rank keeps only its reduced slices (4 x S_b per bucket); a bucket's buffer exists from its
//   first gradient in backward until its reduce-scatter ends. With the reductions overlapping backward,
//   at most the bucket being filled and the one being reduced are alive: counted as the two largest
//   buckets (padded), at most all of them. A run whose communication falls behind backward holds more;
//   no-sync micro-batches of gradient accumulation accumulate full gradients (4 bytes per parameter).
// - both stages: MPI_Reduce_scatter_block allocates scratch of its whole input on some rank (Open MPI's
//   reduce-scatter algorithms reduce into a temporary of the full bucket), one bucket at a time on the
//   communication thread: counted as the largest bucket (padded), once.
// - when: the largest buckets hold the first parameters (the word embeddings), whose gradients backward
//   produces last, when the activations are freed. So the reduction's transients (autograd's gradient of the
//   largest parameter before its copy into the bucket, the scratch, stage 2's buckets in flight) and the
//   activation peak are counted as the larger of the two, not their sum: `reducer_buckets` carries only what
//   the reduction holds beyond the activations. Measured (estimate-memory --measure under `mpirun -np 2`,
//   Note [Measured ZeRO step] in src/train/memory_measure.cpp; tests/mpi_train/test_zero_memory.sh): on the
//   DistilBERT benchmark model at 4 x 64 tokens one rank's peak in backward exceeded stage 0's by the
//   word-embedding bucket (the scratch; without it stage 1 was 30 % under), and at 16 x 128 tokens the sum
//   was 24 % over at stage 2 (the activation peak comes before the embeddings' reduction).
// Parameters stay whole on every rank at stages 1 and 2 (4 bytes each), and so do the activations.
// - stage 3 (Note [Unit gathers] in src/train/parallel/fully_sharded.cpp): the units' groups are the buckets (each
//   laid out with optim::any_segment_alignment, as ShardedParameters lays it out); the rank keeps 4 x S_u bytes of
//   every unit's parameters and of its reduced gradient slices, the state share as above, stage 2's transients
//   at the end of backward, and the gathered units at the peak: with --zero-reshard-after-forward true the two
//   largest others (the one computing and the one prefetched), `rest` and a tied head's embeddings (both kept
//   through the step), else every unit (all of them are gathered by the end of forward).
// One rank shards nothing: stage 0's terms.
namespace {

struct ZeroBucket {
  int64_t real_numel = 0;    // the parameters' elements
  int64_t padded_numel = 0;  // world_size x slice_numel
  int64_t slice_numel = 0;   // elements each rank owns
  int64_t state_bytes = 0;   // stage 0's optimizer state for the bucket's parameters
};

// Stage 0's buckets laid out as the reducer lays them out under ZeRO: dist::zero_bucket_layout with
// optim::segment_alignment, the definitions GradientReducer::enable_zero and ZeroOptimizer use.
std::vector<ZeroBucket> zero_buckets(const ParameterShapes& parameters, const MemoryEstimateOptions& o) {
  std::vector<int64_t> numels, bytes;
  for (const auto& [name, shape] : parameters) {
    numels.push_back(std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
    bytes.push_back(4 * numels.back());
  }
  std::vector<ZeroBucket> out;
  for (const dist::Bucket& bucket : dist::assign_buckets(bytes, o.first_bucket_bytes, o.bucket_bytes)) {
    ZeroBucket b;
    std::vector<int64_t> bucket_numels, alignments;
    for (const std::size_t i : bucket) {
      bucket_numels.push_back(numels[i]);
      alignments.push_back(optim::segment_alignment(o.optimizer, numels[i]));
      b.real_numel += numels[i];
      b.state_bytes += optim::optimizer_state_bytes(o.optimizer, parameters[i].second);
    }
    const dist::ZeroBucketLayout layout = dist::zero_bucket_layout(bucket_numels, alignments, o.world_size);
    b.slice_numel = layout.slice_numel;
    b.padded_numel = layout.padded_numel;
    out.push_back(b);
  }
  return out;
}

int64_t largest_parameter_numel(const ParameterShapes& parameters) {
  int64_t largest = 0;
  for (const auto& [name, shape] : parameters)
    largest = std::max(largest, std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
  return largest;
}

void check_zero_options(const MemoryEstimateOptions& o) {
  parallel::check_zero_combinations(o.zero_stage, 0, o.optimizer.optim);
  HPCTRAIN_CHECK(o.zero_stage < 3 || o.lora_r == 0, "estimate-memory --zero-stage 3 with --lora-r {}: not modeled "
                 "(estimate --zero-stage 2, or measure with --measure)", o.lora_r);
  HPCTRAIN_CHECK(o.world_size >= 1, "--world-size {}: expected a positive number of ranks", o.world_size);
  HPCTRAIN_CHECK(o.first_bucket_bytes > 0 && o.bucket_bytes > 0, "--first-bucket-mb and --bucket-mb: expected "
                 "positive sizes, got {} and {} bytes", o.first_bucket_bytes, o.bucket_bytes);
}

}  // namespace

std::optional<ZeroTerms> zero_terms(const ParameterShapes& parameters, const MemoryEstimateOptions& o,
                                    int64_t activation_bytes) {
  check_zero_options(o);
  if (o.zero_stage == 0 || o.world_size == 1) return std::nullopt;
  ZeroTerms t;
  int64_t padded = 0, slices = 0;
  std::vector<int64_t> bucket_bytes;
  for (const ZeroBucket& b : zero_buckets(parameters, o)) {
    const int64_t real = std::max<int64_t>(1, b.real_numel);
    t.optimizer_state += (b.state_bytes * b.slice_numel + real - 1) / real;  // x S_b / elements, rounded up
    padded += b.padded_numel, slices += b.slice_numel;
    bucket_bytes.push_back(4 * b.padded_numel);
  }
  std::sort(bucket_bytes.rbegin(), bucket_bytes.rend());
  // The end of backward: autograd's gradient of the largest parameter before its copy into the bucket, the
  // reduce-scatter's scratch (the largest bucket) and, at stage 2, the buckets in flight (the two largest).
  int64_t reduction = 4 * largest_parameter_numel(parameters) + bucket_bytes[0];
  if (o.zero_stage == 2) reduction += bucket_bytes[0] + (bucket_bytes.size() > 1 ? bucket_bytes[1] : 0);
  const int64_t beyond_activations = std::max<int64_t>(0, reduction - activation_bytes);
  if (o.zero_stage == 1) {
    t.gradients = 4 * padded, t.reducer_buckets = 4 * slices + beyond_activations;
  } else {
    t.gradients = 4 * slices, t.reducer_buckets = beyond_activations;
  }
  return t;
}

ZeroTerms zero3_terms(const io::HfConfig& config, const MemoryEstimateOptions& o, int64_t activation_bytes) {
  check_zero_options(o);
  ZeroTerms t;
  std::vector<int64_t> unit_bytes, bucket_bytes, others;  // others: the units neither `rest` nor kept
  int64_t slices = 0, largest_parameter = 0, kept_bytes = 0;
  for (const parallel::UnitShapes& unit : parallel::zero3_unit_shapes(config)) {
    std::vector<int64_t> numels, alignments;
    int64_t state = 0, real = 0;
    for (const auto& [name, shape] : unit.parameters) {
      numels.push_back(std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
      alignments.push_back(optim::any_segment_alignment(numels.back()));
      state += optim::optimizer_state_bytes(o.optimizer, shape);
      real += numels.back();
      largest_parameter = std::max(largest_parameter, numels.back());
    }
    const dist::ZeroBucketLayout layout = dist::zero_bucket_layout(numels, alignments, o.world_size);
    slices += layout.slice_numel;
    t.optimizer_state += (state * layout.slice_numel + std::max<int64_t>(real, 1) - 1) / std::max<int64_t>(real, 1);
    unit_bytes.push_back(4 * layout.padded_numel);
    if (unit.name == "rest" || unit.kept) kept_bytes += unit_bytes.back();
    else others.push_back(unit_bytes.back());
  }
  bucket_bytes = unit_bytes;
  std::sort(bucket_bytes.rbegin(), bucket_bytes.rend());
  const int64_t two_largest = bucket_bytes[0] + (bucket_bytes.size() > 1 ? bucket_bytes[1] : 0);
  std::sort(others.rbegin(), others.rend());
  const int64_t two_largest_others = (others.empty() ? 0 : others[0]) + (others.size() > 1 ? others[1] : 0);
  const int64_t gathered = o.zero_reshard_after_forward ? two_largest_others + kept_bytes
                                                         : std::accumulate(unit_bytes.begin(), unit_bytes.end(), int64_t{0});
  t.parameters = 4 * slices + gathered;
  t.gradients = 4 * slices;
  const int64_t reduction = 4 * largest_parameter + bucket_bytes[0] + two_largest;  // as stage 2 (above)
  t.reducer_buckets = std::max<int64_t>(0, reduction - activation_bytes);
  return t;
}

}  // namespace hpctrain::train::detail
