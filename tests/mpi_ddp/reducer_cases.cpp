// Two ranks, each backward on its own input: the reducer's gradients must equal the average of both
// ranks' gradients, which every rank also computes locally on a hook-free replica.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "harness.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/ddp/gradient_reducer.hpp"
#include "tiny_model.hpp"

using hpctrain::ddp::GradientReducer;
using hpctrain::ddp::ReducerOptions;

namespace mpi_test {
namespace {

constexpr double kTolerance = 1e-6;

std::vector<ReducerOptions> option_grid() {
  std::vector<ReducerOptions> grid;
  for (bool overlap : {true, false}) {
    grid.push_back({hpctrain::dist::kDefaultFirstBucketBytes, hpctrain::dist::kDefaultBucketBytes, overlap});
    grid.push_back({16, 64, overlap});  // many small buckets
    grid.push_back({1, 1, overlap});    // one bucket per parameter
  }
  return grid;
}

std::string describe(const ReducerOptions& options) {
  return fmt::format("overlap={} first_bucket_bytes={} bucket_bytes={}", options.overlap, options.first_bucket_bytes,
                     options.bucket_bytes);
}

// A model whose replicas start different and are made equal by the broadcast from rank 0.
tiny::Model synced_model(hpctrain::dist::Comm& comm) {
  tiny::Model model = tiny::Model::make(7 + static_cast<uint64_t>(comm.rank()));
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : model.params) tensors.push_back(tensor);
  hpctrain::ddp::broadcast_parameters(comm, tensors);
  return model;
}

// The average over ranks of each rank's gradients, computed locally.
std::vector<at::Tensor> average_of(const std::vector<std::vector<at::Tensor>>& per_rank) {
  std::vector<at::Tensor> sum = per_rank[0];
  for (std::size_t r = 1; r < per_rank.size(); ++r) sum = tiny::add(sum, per_rank[r]);
  return tiny::scale(sum, 1.0 / static_cast<double>(per_rank.size()));
}

void sgd_step(tiny::Model& model, double learning_rate) {
  at::NoGradGuard no_grad;
  for (auto& [name, tensor] : model.params) tensor.sub_(tensor.grad() * learning_rate);
}

void check_grads(const tiny::Model& model, const std::vector<at::Tensor>& expected, const std::string& context) {
  const double difference = tiny::max_difference(model.grads(), expected);
  EXPECT(difference < kTolerance, "{}: reducer gradients differ from the average by {}", context, difference);
}

}  // namespace

void reducer_matches_average(hpctrain::dist::Comm& comm) {
  EXPECT(comm.thread_level() == hpctrain::dist::ThreadLevel::multiple, "OpenMPI here provides MPI_THREAD_MULTIPLE");
  for (const ReducerOptions& options : option_grid()) {
    tiny::Model model = synced_model(comm);
    GradientReducer reducer(comm, model.params, options);
    EXPECT(reducer.overlap() == options.overlap, "{}: overlap fell back", describe(options));
    for (int step = 0; step < 3; ++step) {
      const auto expected = average_of({tiny::replica_grads(model, {tiny::input_for(0, step)}),
                                        tiny::replica_grads(model, {tiny::input_for(1, step)})});
      model.zero_grads();
      model.loss(tiny::input_for(comm.rank(), step)).backward();
      const std::string warning = reducer.finalize();
      EXPECT(warning.empty(), "unexpected warning: {}", warning);
      check_grads(model, expected, fmt::format("{} step {}", describe(options), step));
      sgd_step(model, 0.1);
    }
    const std::string differing = hpctrain::ddp::find_unsynchronized(comm, model.params);
    EXPECT(differing.empty(), "{}: replicas diverged at {}", describe(options), differing);
    const auto& stats = reducer.total_stats();
    EXPECT(stats.steps == 3 && stats.bytes_reduced > 0, "stats: {} steps, {} bytes", stats.steps, stats.bytes_reduced);
    if (comm.rank() == 0) {
      fmt::print("{}: {} buckets, {} bytes/step, allreduce {:.3f} ms/step, exposed {:.3f} ms/step\n", describe(options),
                 reducer.buckets().size(), reducer.last_step_stats().bytes_reduced, stats.allreduce_seconds * 1e3 / 3,
                 stats.exposed_seconds * 1e3 / 3);
    }
  }
}

void unused_parameters(hpctrain::dist::Comm& comm) {
  const int rank = comm.rank();
  // Which ranks use optional.scale, and whether rank 1 runs backward at all.
  struct Scenario {
    const char* name;
    bool rank0_uses, rank1_uses, rank1_backward;
  };
  const Scenario scenarios[] = {{"unused on rank 1 only", true, false, true},
                                {"unused on both ranks", false, false, true},
                                {"rank 1 runs no backward", true, false, false}};
  for (const Scenario& scenario : scenarios) {
    for (const ReducerOptions& options : option_grid()) {
      const std::string context = fmt::format("{}, {}", scenario.name, describe(options));
      tiny::Model model = synced_model(comm);
      GradientReducer reducer(comm, model.params, options);
      const bool uses[2] = {scenario.rank0_uses, scenario.rank1_uses};
      for (int step = 0; step < 2; ++step) {
        std::vector<std::vector<at::Tensor>> per_rank;
        for (int r = 0; r < 2; ++r) {
          const bool runs_backward = r == 0 || scenario.rank1_backward;
          per_rank.push_back(runs_backward ? tiny::replica_grads(model, {tiny::input_for(r, step)}, uses[r])
                                           : tiny::replica_grads(model, {}));
        }
        model.zero_grads();
        if (rank == 0 || scenario.rank1_backward) model.loss(tiny::input_for(rank, step), uses[rank]).backward();
        const std::string warning = reducer.finalize();
        check_grads(model, average_of(per_rank), fmt::format("{} step {}", context, step));
        const bool unused_here = !uses[rank] || (rank == 1 && !scenario.rank1_backward);
        const bool named = warning.find("optional.scale") != std::string::npos;
        EXPECT(named == (unused_here && step == 0), "{} step {}: warning on rank {}: '{}'", context, step, rank, warning);
        const auto& unused = reducer.unused_parameters();
        const bool listed = std::find(unused.begin(), unused.end(), "optional.scale") != unused.end();
        EXPECT(listed == unused_here, "{}: unused_parameters() on rank {} has {} entries", context, rank, unused.size());
      }
      if (!scenario.rank0_uses) {
        EXPECT(model.get("optional.scale").grad().abs().max().item<double>() == 0.0, "{}: expected zero gradient",
              context);
      }
    }
  }
}

void no_sync_accumulation(hpctrain::dist::Comm& comm) {
  for (const ReducerOptions& options : option_grid()) {
    tiny::Model model = synced_model(comm);
    GradientReducer reducer(comm, model.params, options);
    std::vector<std::vector<at::Tensor>> per_rank;
    for (int r = 0; r < 2; ++r) {
      std::vector<at::Tensor> inputs;
      for (int micro = 0; micro < 4; ++micro) inputs.push_back(tiny::input_for(r, micro));
      per_rank.push_back(tiny::replica_grads(model, inputs));
    }
    {
      hpctrain::ddp::NoSyncScope no_sync(reducer);
      for (int micro = 0; micro < 3; ++micro) {
        model.loss(tiny::input_for(comm.rank(), micro)).backward();
        EXPECT(reducer.finalize().empty(), "finalize without sync must be a no-op");
      }
    }
    model.loss(tiny::input_for(comm.rank(), 3)).backward();
    EXPECT(reducer.finalize().empty(), "unexpected warning");
    check_grads(model, average_of(per_rank), describe(options));
    EXPECT(reducer.total_stats().steps == 1, "the no-sync micro-batches must not communicate");
  }
}

void late_gradients(hpctrain::dist::Comm& comm) {
  // Rank 1 always runs two backward passes before finalize; rank 0 one or two. With overlap and
  // small buckets the second pass's gradients arrive after their buckets were launched.
  for (int rank0_passes : {2, 1}) {
    for (const ReducerOptions& options : option_grid()) {
      const std::string context = fmt::format("rank 0 runs {} passes, {}", rank0_passes, describe(options));
      tiny::Model model = synced_model(comm);
      GradientReducer reducer(comm, model.params, options);
      const int passes[2] = {rank0_passes, 2};
      for (int step = 0; step < 2; ++step) {
        std::vector<std::vector<at::Tensor>> per_rank;
        for (int r = 0; r < 2; ++r) {
          std::vector<at::Tensor> inputs;
          for (int pass = 0; pass < passes[r]; ++pass) inputs.push_back(tiny::input_for(r, 10 * step + pass));
          per_rank.push_back(tiny::replica_grads(model, inputs));
        }
        model.zero_grads();
        for (int pass = 0; pass < passes[comm.rank()]; ++pass) {
          model.loss(tiny::input_for(comm.rank(), 10 * step + pass)).backward();
        }
        EXPECT(reducer.finalize().empty(), "unexpected warning");
        check_grads(model, average_of(per_rank), fmt::format("{} step {}", context, step));
      }
    }
  }
}

// Note [ZeRO gradient reduction]: with enable_zero each rank's slices hold exactly its segments of the
// average (late gradients included: rank 1 runs two backward passes), .grad is left undefined, and
// allgather_parameters() gives every rank every rank's segments (each rank writes its rank number into
// its own segments first).
void zero_slices(hpctrain::dist::Comm& comm) {
  for (int stage : {1, 2}) {
    for (const ReducerOptions& options : option_grid()) {
      const std::string context = fmt::format("stage {}, {}", stage, describe(options));
      tiny::Model model = synced_model(comm);
      GradientReducer reducer(comm, model.params, options);
      reducer.enable_zero(stage, std::vector<int64_t>(model.params.size(), 1));
      for (int step = 0; step < 2; ++step) {
        const int passes[2] = {1 + step, 2};
        std::vector<std::vector<at::Tensor>> per_rank;
        for (int r = 0; r < 2; ++r) {
          std::vector<at::Tensor> inputs;
          for (int pass = 0; pass < passes[r]; ++pass) inputs.push_back(tiny::input_for(r, 10 * step + pass));
          per_rank.push_back(tiny::replica_grads(model, inputs));
        }
        const std::vector<at::Tensor> expected = average_of(per_rank);
        model.zero_grads();
        for (int pass = 0; pass < passes[comm.rank()]; ++pass)
          model.loss(tiny::input_for(comm.rank(), 10 * step + pass)).backward();
        EXPECT(reducer.finalize().empty(), "unexpected warning");
        const std::vector<at::Tensor> slices = reducer.gradient_slices();
        for (std::size_t i = 0; i < model.params.size(); ++i) {
          const GradientReducer::Shard& shard = reducer.shards()[i];
          const auto& segment = shard.segment;
          EXPECT(!model.params[i].second.grad().defined(), "{}: .grad of parameter {} kept", context, i);
          const at::Tensor got = slices[shard.bucket].narrow(0, segment.slice_offset, segment.numel());
          const at::Tensor want = expected[i].reshape(-1).narrow(0, segment.begin, segment.numel());
          const double difference = got.numel() == 0 ? 0.0 : (got - want).abs().max().item<double>();
          EXPECT(difference < kTolerance, "{} step {}: slice of parameter {} differs by {}", context, step, i, difference);
        }
      }
      {
        at::NoGradGuard no_grad;
        for (std::size_t i = 0; i < model.params.size(); ++i) {
          const auto& segment = reducer.shards()[i].segment;
          model.params[i].second.detach().reshape(-1).narrow(0, segment.begin, segment.numel()).fill_(comm.rank());
        }
      }
      reducer.allgather_parameters();
      int64_t owned[2] = {0, 0};
      for (const auto& [name, tensor] : model.params) {
        owned[0] += tensor.eq(0).sum().item<int64_t>();
        owned[1] += tensor.eq(1).sum().item<int64_t>();
        EXPECT((tensor.eq(0) | tensor.eq(1)).all().item<bool>(), "{}: '{}' not all-gathered", context, name);
      }
      EXPECT(owned[0] > 0 && owned[1] > 0, "{}: one rank owns everything ({} and {})", context, owned[0], owned[1]);
      const auto all = comm.allgather_value(owned[0]);
      EXPECT(all[0] == all[1], "{}: the ranks hold different parameters after the all-gather", context);
    }
  }
}

// Note [Gradients as bucket views]: after finalize() every .grad is a view of the reducer's persistent
// buffers (the same memory every step), and the ways users clear or keep gradients between steps give
// torch's results — above all zero_() in place with overlap on, where autograd would otherwise add the
// next gradient into a bucket while it is being reduced.
void gradient_views(hpctrain::dist::Comm& comm) {
  for (const ReducerOptions& options : option_grid()) {
    tiny::Model model = synced_model(comm);
    GradientReducer reducer(comm, model.params, options);
    auto average = [&](std::vector<at::Tensor> rank0, std::vector<at::Tensor> rank1) {
      return average_of({std::move(rank0), std::move(rank1)});
    };
    auto inputs_of = [](int r, std::initializer_list<int> ids) {
      std::vector<at::Tensor> inputs;
      for (int id : ids) inputs.push_back(tiny::input_for(r, id));
      return inputs;
    };
    auto pointers = [&] {
      std::vector<const void*> out;
      for (const auto& [name, tensor] : model.params) out.push_back(tensor.grad().data_ptr());
      return out;
    };

    // Step 0: gradients set to none, as Accelerator::zero_grad does.
    auto expected = average(tiny::replica_grads(model, inputs_of(0, {0})), tiny::replica_grads(model, inputs_of(1, {0})));
    model.zero_grads();
    model.loss(tiny::input_for(comm.rank(), 0)).backward();
    EXPECT(reducer.finalize().empty(), "unexpected warning");
    check_grads(model, expected, describe(options) + " step 0 (grads set to none)");
    const std::vector<const void*> views = pointers();

    // Step 1: gradients zeroed in place.
    expected = average(tiny::replica_grads(model, inputs_of(0, {1})), tiny::replica_grads(model, inputs_of(1, {1})));
    for (const auto& [name, tensor] : model.params) tensor.grad().zero_();
    model.loss(tiny::input_for(comm.rank(), 1)).backward();
    EXPECT(reducer.finalize().empty(), "unexpected warning");
    check_grads(model, expected, describe(options) + " step 1 (grads zeroed in place)");
    EXPECT(pointers() == views, "{}: .grad must stay the reducer's buffer across steps", describe(options));

    // Step 2: gradients kept (torch accumulates into .grad), then a no-sync micro-batch accumulating into
    // the views, then a synced one: the previous average plus the average of both micro-batches.
    std::vector<at::Tensor> previous;
    for (const at::Tensor& grad : model.grads()) previous.push_back(grad.clone());  // not views of the buffers
    expected = tiny::add(previous, average(tiny::replica_grads(model, inputs_of(0, {2, 3})),
                                           tiny::replica_grads(model, inputs_of(1, {2, 3}))));
    {
      hpctrain::ddp::NoSyncScope no_sync(reducer);
      model.loss(tiny::input_for(comm.rank(), 2)).backward();
      EXPECT(reducer.finalize().empty(), "finalize without sync must be a no-op");
    }
    model.loss(tiny::input_for(comm.rank(), 3)).backward();
    EXPECT(reducer.finalize().empty(), "unexpected warning");
    check_grads(model, expected, describe(options) + " step 2 (grads kept, one no-sync micro-batch)");
    EXPECT(pointers() == views, "{}: .grad must stay the reducer's buffer across steps", describe(options));
  }
}

}  // namespace mpi_test
