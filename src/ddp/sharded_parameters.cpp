// ZeRO-3's sharded parameters (sharded_parameters.hpp).
#include "hpctrain/ddp/sharded_parameters.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/StorageImpl.h>

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "bucket_place.hpp"
#include "comm_thread.hpp"
#include "copy_fence.hpp"
#include "zero_reduce.hpp"
#include "hpctrain/compat/current_device.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"

// Note [Sharded parameters]
// With --zero-stage 3 a unit's parameters (of one dtype, all trainable or all frozen: a group) are laid out in
// one flat buffer exactly as a gradient bucket of the same parameters (dist::zero_bucket_layout; Note [ZeRO
// slices]), and each module parameter is made a view into it (set_data: the parameter stays the same leaf, with
// its hooks and its .grad). Rank r keeps elements [r S, (r + 1) S) of the buffer as its shard, a tensor of its
// own that the optimizer updates in place; the buffer holds memory only while the unit is gathered. Gathering
// allocates the buffer's storage again, copies the shard into this rank's block and all-gathers the blocks in
// place; releasing swaps the storage's memory for none. The storage object stays the same (only its data
// pointer and size change), so every view autograd saved during forward — the parameter itself, weight.t() of
// a linear layer — reads the values gathered again before backward, as PyTorch FSDP's storage resize does.
// MPI writes the buffer through its raw pointer, so no version counter moves: autograd's saved-tensor checks
// see the same version at backward as at forward. A parameter must not be read while its unit is released (its
// storage has no memory then): the hooks of src/train/parallel/fully_sharded.cpp gather a unit before its
// forward and its backward.
// Gathers run on their own duplicate of the communicator and, with overlap, on their own communication thread,
// in submission order (Note [Bucket order]: every rank prefetches and gathers the same units in the same order),
// so a prefetch overlaps the caller's computation and never interleaves with the gradient reducer's collectives.
// Placement as the reducer's buckets (Note [Device buckets]): the buffers live with the parameters; on a GPU with
// an MPI that is not CUDA-aware the all-gather runs in a pinned host copy of the buffer, then copied to the
// device asynchronously on the gathering thread's current stream (fenced before the next gather reuses it).
namespace hpctrain::ddp {
namespace {

using Fence = std::function<void(const at::Tensor&)>;

// The buffers of one group, shared with the communication thread (which may outlive the owner).
struct GroupBuffers {
  at::Tensor full;       // [padded]: the parameters are views into it; storage without memory when released
  at::Tensor host;       // pinned staging copy of `full` (GPU parameters, MPI not CUDA-aware); else undefined
  CopyFence host_read;   // the last asynchronous copy out of `host`
  int64_t nbytes = 0;    // of `full` when gathered
};

c10::StorageImpl* storage_of(const at::Tensor& tensor) { return tensor.storage().unsafeGetStorageImpl(); }

void free_storage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = storage_of(tensor);
  storage->set_data_ptr(at::DataPtr(nullptr, tensor.device()));  // the old memory is freed here
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& tensor, int64_t nbytes) {
  c10::StorageImpl* storage = storage_of(tensor);
  if (storage->nbytes() == static_cast<std::size_t>(nbytes)) return;
  storage->set_data_ptr(storage->allocator()->allocate(static_cast<std::size_t>(nbytes)));
  storage->set_nbytes(static_cast<std::size_t>(nbytes));
}

// All-gathers one group: this rank's shard into its block of the buffer, every rank's block to every rank.
void gather_group(dist::Comm& comm, GroupBuffers& buffers, const at::Tensor& shard, const Fence& fence) {
  at::NoGradGuard no_grad;
  allocate_storage(buffers.full, buffers.nbytes);
  const int64_t slice = shard.numel();
  const at::Tensor& values = buffers.host.defined() ? buffers.host : buffers.full;
  if (buffers.host.defined()) buffers.host_read.wait();  // the previous copy out of it has finished
  values.narrow(0, slice * comm.rank(), slice).copy_(shard);
  allgather_slices(comm, values, fence);
  if (buffers.host.defined()) {
    buffers.full.copy_(buffers.host, /*non_blocking=*/true);
    buffers.host_read.record(buffers.full.device());
  }
}

struct UnitState {
  std::string name;
  std::vector<std::size_t> groups;
  bool gathered = false;
  uint64_t ticket = 0;  // > 0: a queued gather of it
};

}  // namespace

struct ShardedParameters::Impl {
  std::shared_ptr<dist::Comm> comm;  // private duplicate (Note [Sharded parameters])
  Fence fence;
  BucketPlace place = BucketPlace::host;
  bool overlap = false;
  std::vector<UnitState> units;
  std::vector<Group> groups;
  std::vector<std::shared_ptr<GroupBuffers>> buffers;  // one per group
  std::vector<Parameter> parameters;
  std::unique_ptr<CommThread> thread;  // last: destroyed (joined) first

  void add_unit(Unit unit, const std::function<int64_t(int64_t)>& alignment);
  void add_group(std::size_t unit, bool trainable, const std::vector<std::size_t>& members,
                 const std::function<int64_t(int64_t)>& alignment);
  void run_gather(std::size_t unit);
  void wait(UnitState& unit);
};

ShardedParameters::ShardedParameters(dist::Comm& comm, std::vector<Unit> units,
                                     const std::function<int64_t(int64_t)>& alignment, ShardedParametersOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.comm = comm.duplicate();
  s.fence = [observe = options.on_fence](const at::Tensor& buffer) {
    wait_for_queued_work(buffer.device());
    if (observe) observe(buffer);
  };
  std::unordered_set<const void*> seen;
  at::Device device(at::kCPU);
  bool first = true;
  for (const Unit& unit : units) {
    for (const auto& [name, param] : unit.parameters) {
      HPCTRAIN_CHECK(param.defined() && param.is_floating_point() && param.is_contiguous(), "--zero-stage 3: parameter "
                     "'{}' must be a contiguous floating-point tensor", name);
      HPCTRAIN_CHECK(seen.insert(param.unsafeGetTensorImpl()).second, "--zero-stage 3: parameter '{}' is in two units "
                     "(pass shared weights once)", name);
      if (first) device = param.device();
      first = false;
      HPCTRAIN_CHECK(param.device() == device, "--zero-stage 3: parameter '{}' is on {}, others on {}; expected one "
                     "device per rank", name, param.device().str(), device.str());
    }
  }
  s.place = plan_bucket_place(device, *s.comm);
  s.overlap = options.overlap && s.comm->thread_level() == dist::ThreadLevel::multiple;
  for (Unit& unit : units) {
    if (options.before_unit) options.before_unit(unit.parameters);  // Note [Deferred materialization]
    s.add_unit(std::move(unit), alignment);
  }
  if (s.overlap) s.thread = std::make_unique<CommThread>([device] { compat::make_device_current(device); });
}

ShardedParameters::~ShardedParameters() = default;

// A unit's groups: its parameters split by (trainable, dtype), each group in the unit's order.
void ShardedParameters::Impl::add_unit(Unit unit, const std::function<int64_t(int64_t)>& alignment) {
  const std::size_t index = units.size();
  units.push_back(UnitState{unit.name, {}, false, 0});
  std::map<std::pair<bool, int>, std::vector<std::size_t>> by_kind;
  std::vector<std::pair<bool, int>> order;
  for (auto& [name, param] : unit.parameters) {
    const std::pair<bool, int> kind{param.requires_grad(), static_cast<int>(param.scalar_type())};
    if (by_kind.find(kind) == by_kind.end()) order.push_back(kind);
    by_kind[kind].push_back(parameters.size());
    parameters.push_back(Parameter{std::move(name), std::move(param), 0, {}});
  }
  for (const auto& kind : order) add_group(index, kind.first, by_kind[kind], alignment);
}

void ShardedParameters::Impl::add_group(std::size_t unit, bool trainable, const std::vector<std::size_t>& members,
                                        const std::function<int64_t(int64_t)>& alignment) {
  at::NoGradGuard no_grad;
  std::vector<int64_t> numels, alignments;
  for (std::size_t index : members) {
    numels.push_back(parameters[index].tensor.numel());
    alignments.push_back(alignment(numels.back()));
  }
  Group group;
  group.unit = unit;
  group.trainable = trainable;
  group.members = members;
  group.layout = dist::zero_bucket_layout(numels, alignments, comm->world_size());
  const std::vector<dist::ZeroSegment> segments = dist::zero_segments(group.layout, numels, comm->rank());
  const at::Tensor& first = parameters[members.front()].tensor;
  auto buffer = std::make_shared<GroupBuffers>();
  buffer->full = at::zeros({group.layout.padded_numel}, first.options());
  buffer->nbytes = static_cast<int64_t>(buffer->full.nbytes());
  if (place == BucketPlace::pinned_host)
    buffer->host = at::empty({group.layout.padded_numel}, first.options().device(at::kCPU).pinned_memory(true));
  for (std::size_t i = 0; i < members.size(); ++i) {
    Parameter& p = parameters[members[i]];
    at::Tensor view = buffer->full.narrow(0, group.layout.offsets[i], numels[i]).view(p.tensor.sizes());
    view.copy_(p.tensor.detach());
    p.tensor.set_data(view);  // the same leaf, now a view of the buffer (Note [Sharded parameters])
    p.group = groups.size();
    p.segment = segments[i];
  }
  const int64_t slice = group.layout.slice_numel;
  group.shard = buffer->full.narrow(0, slice * comm->rank(), slice).clone();
  free_storage(buffer->full);
  units[unit].groups.push_back(groups.size());
  groups.push_back(std::move(group));
  buffers.push_back(std::move(buffer));
}

void ShardedParameters::Impl::run_gather(std::size_t unit) {
  UnitState& state = units[unit];
  std::vector<std::pair<std::shared_ptr<GroupBuffers>, at::Tensor>> jobs;
  for (std::size_t g : state.groups) jobs.emplace_back(buffers[g], groups[g].shard);
  auto job = [shared_comm = comm, jobs = std::move(jobs), job_fence = fence, unit,
              label = fmt::format("parameter all-gather of unit '{}'", state.name)] {
    span::Span gather("parameter allgather", "communication", static_cast<int64_t>(unit));
    shared_comm->set_label(label);  // named by a collective timeout (Note [Collective timeout])
    for (const auto& [buffer, shard] : jobs) gather_group(*shared_comm, *buffer, shard, job_fence);
  };
  if (overlap) {
    state.ticket = thread->submit(std::move(job));
  } else {
    job();
  }
  state.gathered = true;
}

void ShardedParameters::Impl::wait(UnitState& unit) {
  if (unit.ticket == 0) return;
  span::Span waiting("parameter gather wait", "communication");
  thread->wait(unit.ticket);
  unit.ticket = 0;
}

std::size_t ShardedParameters::num_units() const { return impl_->units.size(); }
const std::string& ShardedParameters::unit_name(std::size_t unit) const { return impl_->units.at(unit).name; }
const std::vector<ShardedParameters::Group>& ShardedParameters::groups() const { return impl_->groups; }
const std::vector<ShardedParameters::Parameter>& ShardedParameters::parameters() const { return impl_->parameters; }

at::Tensor ShardedParameters::segment(std::size_t index) const {
  const Parameter& p = impl_->parameters.at(index);
  return impl_->groups[p.group].shard.narrow(0, p.segment.slice_offset, p.segment.numel());
}

void ShardedParameters::prefetch(std::size_t unit) {
  if (!impl_->units.at(unit).gathered) impl_->run_gather(unit);
}

void ShardedParameters::gather(std::size_t unit) {
  prefetch(unit);
  impl_->wait(impl_->units[unit]);
}

void ShardedParameters::release(std::size_t unit) {
  UnitState& state = impl_->units.at(unit);
  if (!state.gathered) return;
  impl_->wait(state);
  for (std::size_t g : state.groups) {
    GroupBuffers& buffer = *impl_->buffers[g];
    buffer.host_read.wait();  // the copy into `full` has been queued before any later kernel; the staging is free
    free_storage(buffer.full);
  }
  state.gathered = false;
}

void ShardedParameters::release_all() {
  for (std::size_t unit = 0; unit < impl_->units.size(); ++unit) release(unit);
}

bool ShardedParameters::gathered(std::size_t unit) const { return impl_->units.at(unit).gathered; }

void ShardedParameters::keep_gathered_values() {
  at::NoGradGuard no_grad;
  for (UnitState& unit : impl_->units) {
    if (!unit.gathered) continue;
    impl_->wait(unit);
    for (std::size_t g : unit.groups) {
      Group& group = impl_->groups[g];
      const int64_t slice = group.layout.slice_numel;
      group.shard.copy_(impl_->buffers[g]->full.narrow(0, slice * impl_->comm->rank(), slice));
    }
  }
}

int64_t ShardedParameters::shard_bytes() const {
  int64_t bytes = 0;
  for (const Group& group : impl_->groups) bytes += static_cast<int64_t>(group.shard.nbytes());
  return bytes;
}

int64_t ShardedParameters::gathered_bytes() const {
  int64_t bytes = 0;
  for (const auto& buffer : impl_->buffers) bytes += buffer->nbytes;
  return bytes;
}

}  // namespace hpctrain::ddp
