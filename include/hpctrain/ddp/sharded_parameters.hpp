// ZeRO-3's parameters (--zero-stage 3, Note [Sharded parameters] in src/ddp/sharded_parameters.cpp): each unit's
// parameters (a transformer layer, the embeddings, the head, the rest) are views into flat buffers that hold
// memory only while the unit is gathered; between gathers every rank keeps only its slice of each buffer (its
// shard). gather() all-gathers a unit's shards into its buffers, release() frees them again. Works on tensors,
// never sees a model; the hooks that call it around a unit's forward and backward are in
// src/train/parallel/fully_sharded.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/ddp/named_tensors.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/dist/zero_slices.hpp"

namespace hpctrain::ddp {

struct ShardedParametersOptions {
  // Gathers run on a communication thread (needs MPI_THREAD_MULTIPLE; else on the caller's thread), so that
  // prefetch() overlaps the caller's computation.
  bool overlap = true;
  // Observes the fences before and after every collective (Note [Fenced collectives] in
  // src/ddp/gradient_reducer.cpp); for tests, empty in production.
  std::function<void(const at::Tensor& buffer)> on_fence;
  // Called with each unit just before its values are taken into the shards, one unit after the other: a model
  // built without its parameters' memory materializes the unit here (Note [Deferred materialization] in
  // src/models/materialize.cpp), so that no more than one whole unit exists at a time.
  std::function<void(const NamedTensors& unit_parameters)> before_unit;
};

class ShardedParameters {
 public:
  // Parameters gathered together, in the order their unit's forward uses them.
  struct Unit {
    std::string name;  // for logs and the collective timeout ("transformer layer 3")
    NamedTensors parameters;
  };
  // A unit's parameters of one dtype, all trainable or all frozen, laid out in one flat buffer by
  // dist::zero_bucket_layout (the layout a gradient bucket of the same parameters gets: Note [ZeRO slices]).
  struct Group {
    std::size_t unit = 0;
    bool trainable = false;
    std::vector<std::size_t> members;  // indices into parameters(), in layout order
    dist::ZeroBucketLayout layout;
    at::Tensor shard;  // this rank's slice: layout.slice_numel elements [rank S, (rank + 1) S) of the buffer
  };
  struct Parameter {
    std::string name;
    at::Tensor tensor;  // the module's parameter, a view into its group's buffer
    std::size_t group = 0;
    dist::ZeroSegment segment;  // this rank's part of it, at segment.slice_offset in the group's shard
  };

  // Collective (duplicates `comm`). Takes the parameters' values (which must be the same on every rank) into
  // this rank's shards and releases them: from here on a parameter holds memory only while its unit is gathered.
  // Every parameter once over all units, contiguous, floating, all on one device. alignment(numel): the
  // element multiple a parameter's segments must start at (optim::segment_alignment).
  ShardedParameters(dist::Comm& comm, std::vector<Unit> units, const std::function<int64_t(int64_t numel)>& alignment,
                    ShardedParametersOptions options = {});
  ~ShardedParameters();
  ShardedParameters(const ShardedParameters&) = delete;
  ShardedParameters& operator=(const ShardedParameters&) = delete;

  [[nodiscard]] std::size_t num_units() const;
  [[nodiscard]] const std::string& unit_name(std::size_t unit) const;
  [[nodiscard]] const std::vector<Group>& groups() const;
  [[nodiscard]] const std::vector<Parameter>& parameters() const;
  // This rank's values of parameter `index` (1-D, segment.numel() elements): a view into its group's shard.
  [[nodiscard]] at::Tensor segment(std::size_t index) const;

  // Collective: queues the all-gather of `unit` (nothing when it is gathered or queued already). Every rank
  // gathers and prefetches the same units in the same order.
  void prefetch(std::size_t unit);
  // Collective: `unit`'s parameters hold every rank's values when it returns (waits for its prefetch).
  void gather(std::size_t unit);
  // Frees `unit`'s buffers (waits for a queued gather of it first). Not collective.
  void release(std::size_t unit);
  void release_all();
  [[nodiscard]] bool gathered(std::size_t unit) const;  // gathered, or queued
  // After the caller wrote whole values (the same on every rank) into gathered units' parameters: this rank's part
  // of every gathered unit becomes its shard. Not collective.
  void keep_gathered_values();

  // Bytes of this rank's shards (padding included), and of every unit's buffers when all are gathered.
  [[nodiscard]] int64_t shard_bytes() const;
  [[nodiscard]] int64_t gathered_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpctrain::ddp
