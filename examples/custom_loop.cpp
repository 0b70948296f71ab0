// A custom data-parallel training loop on the Accelerator API: what `hpctrain train` does, by hand, with the
// same seams — the task's objective (loss sum and count, evaluation) and the one step protocol
// (Accelerator::optimizer_step: unscale, agree on overflow, clip, step, update the loss scale, zero the
// gradients). Gradient accumulation, a warm-up schedule, exact evaluation and a rank-0 checkpoint. Run it
// like the CLI:
//   mpirun -np 2 custom_loop DATA.h5 CONFIG.json OUTPUT_DIR [EPOCHS] [OPTIM] [--loss-scale dynamic]
//                            [--inject-overflow RANK:STEP]
// OPTIM is one of `hpctrain train`'s --optim names (adamw_torch, sgd, adafactor, ...): the loop picks the
// optimizer through the optim::Optimizer interface (make_optimizer) and never names its type.
// DATA.h5 comes from `hpctrain prep text`; CONFIG.json is a DistilBERT/BERT config (labels are taken
// from the dataset). --inject-overflow makes that rank's gradients inf in that step (1-based), as
// `hpctrain train --inject-overflow` does. With the same options the loop ends where
//   hpctrain train --model-config CONFIG.json --data DATA.h5 --seed 42 --batch-size 4 --shuffle global
//     --gradient-accumulation-steps 2 --lr 1e-3 --warmup-steps 2 --epochs EPOCHS --optim OPTIM ...
// ends (tests/examples/test_custom_loop.sh checks it). Not shown: resume, the stop agreement, metrics files
// (see src/train/trainer.cpp).
#include <ATen/ATen.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/materialize.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/objective.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/schedule.hpp"
#include "hpctrain/train/train_options.hpp"

using namespace hpctrain;

namespace {

constexpr uint64_t kSeed = 42;         // weights, data order and dropout, as `hpctrain train --seed 42`
constexpr int64_t kAccumulation = 2;   // micro-batches per optimizer step

struct Args {
  std::string data, config, output;
  int64_t epochs = 2;
  std::string optim = "adamw_torch";
  std::string loss_scale = "auto";
  std::string inject_overflow;  // RANK:STEP
};

// The model of CONFIG.json with the dataset's labels; every rank seeds alike (rank 0's weights win anyway).
std::shared_ptr<models::SequenceClassifier> build_model(const Args& args) {
  io::HfConfig config = io::HfConfig::load(args.config);
  config.common.set_labels(data::DatasetReader(args.data).label_names());
  // As `hpctrain train --seed` builds it: each parameter from (seed, its name) (Note [Deferred materialization]).
  auto model = std::dynamic_pointer_cast<models::SequenceClassifier>(models::build_seeded_model(config, kSeed));
  HPCTRAIN_CHECK(model != nullptr, "{}: not a sequence classifier", args.config);
  return model;
}

int run(dist::Comm& comm, const Args& args) {
  train::AcceleratorOptions options;
  options.gradient_accumulation_steps = kAccumulation;
  options.seed = kSeed;
  options.loss_scaling = train::parse_loss_scaling(args.loss_scale);
  train::Accelerator acc(comm, options);
  const bool inject = !args.inject_overflow.empty();
  const train::InjectedOverflow overflow = inject ? train::parse_injected_overflow(args.inject_overflow) : train::InjectedOverflow{};
  auto model = build_model(args);
  acc.prepare_model(*model);  // before the optimizer: the model is on its device now
  // Any optimizer through the optim::Optimizer interface; --optim's names (optim::optimizer_names()).
  optim::OptimizerOptions optimizer_options;
  optimizer_options.optim = args.optim;
  const std::unique_ptr<optim::Optimizer> optimizer = optim::make_optimizer(
      optimizer_options, model->named_parameters().pairs(), models::no_weight_decay_parameters(*model));
  loader::LoaderOptions train_data;
  train_data.batch_size = 4, train_data.shuffle = data::ShuffleMode::global, train_data.seed = kSeed;
  auto train_loader = acc.prepare(*model, *optimizer, args.data, train_data);
  loader::LoaderOptions eval_data;
  eval_data.split = "validation", eval_data.shuffle = data::ShuffleMode::none, eval_data.batch_size = 4;
  auto eval_loader = acc.prepare_data(args.data, eval_data);
  // The task: how a batch becomes a loss sum and the count it is normalised by, and what evaluation reports.
  const std::unique_ptr<train::Objective> objective = train::make_objective(data::DatasetReader(args.data));

  const int64_t steps_per_epoch = (train_loader->batches_per_epoch() + kAccumulation - 1) / kAccumulation;
  const train::LrSchedule schedule{train::ScheduleKind::linear, 1e-3, 2, args.epochs * steps_per_epoch};
  int64_t step = 0;
  model->train();
  for (int64_t epoch = 0; epoch < args.epochs; ++epoch) {
    train_loader->start_epoch(epoch);
    const int64_t batches = train_loader->batches_per_epoch();
    for (int64_t first = 0; first < batches; first += kAccumulation) {
      // A step's micro-batches are read first, so that the step's count (the units its loss is averaged
      // over, on every rank) is known before the first backward (Note [Objectives]).
      std::vector<loader::Batch> micro_batches;
      double units = 0;
      for (int64_t b = first; b < std::min(batches, first + kAccumulation); ++b) {
        micro_batches.push_back(*train_loader->next());
        units += objective->count(micro_batches.back(), micro_batches.back().is_padding.logical_not());
      }
      units = comm.allreduce_value(units);
      double loss_sum = 0;
      for (std::size_t i = 0; i < micro_batches.size(); ++i) {
        const bool sync = acc.accumulate(i + 1 == micro_batches.size());
        acc.seed_step(step, static_cast<int64_t>(i));
        const at::Tensor keep = micro_batches[i].is_padding.logical_not();
        const train::MicroBatchLoss loss = objective->loss(*model, micro_batches[i], keep, acc);
        // The mean over the step's global batch: the reducer averages over W ranks.
        double scale = comm.world_size() / std::max(1.0, units);
        if (sync && inject && overflow == train::InjectedOverflow{comm.rank(), step + 1})
          scale = std::numeric_limits<double>::infinity();
        loss_sum += comm.allreduce_value(loss.sum.item<double>());
        acc.backward(loss.sum * scale);
      }
      const train::StepOutcome outcome = acc.optimizer_step(train::learning_rate(schedule, step++), /*max_grad_norm=*/1.0);
      const std::string scale_text = outcome.loss_scale ? fmt::format(" loss_scale {}", *outcome.loss_scale) : "";
      if (outcome.stepped())
        acc.print("epoch {} step {} loss {:.4f} grad_norm {:.3f}{}", epoch, step, loss_sum / units, outcome.grad_norm,
                  scale_text);
      else
        acc.print("epoch {} step {} skipped: the gradients hold inf/NaN{}", epoch, step, scale_text);
    }
    const train::Evaluation evaluation = objective->evaluate(*model, *eval_loader, train::eval_context(acc));
    acc.print("epoch {}: validation accuracy {:.4f}", epoch, evaluation.metrics.score("accuracy").value_or(0));
  }
  acc.save_state(args.output, nlohmann::json{{"global_step", step}});
  acc.print("saved {}", args.output);
  return 0;
}

// Positional DATA CONFIG OUTPUT [EPOCHS] [OPTIM], then the flags. Returns false on a usage error.
bool parse(int argc, char** argv, Args& args) {
  int positional = 0;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--loss-scale") == 0 && has_value) {
      args.loss_scale = argv[++i];
    } else if (std::strcmp(argv[i], "--inject-overflow") == 0 && has_value) {
      args.inject_overflow = argv[++i];
    } else if (argv[i][0] == '-') {
      return false;
    } else {
      switch (positional++) {
        case 0: args.data = argv[i]; break;
        case 1: args.config = argv[i]; break;
        case 2: args.output = argv[i]; break;
        case 3: args.epochs = std::stoll(argv[i]); break;
        case 4: args.optim = argv[i]; break;
        default: return false;
      }
    }
  }
  return positional >= 3;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) {
    std::fprintf(stderr, "usage: mpirun -np N %s DATA.h5 CONFIG.json OUTPUT_DIR [EPOCHS] [OPTIM] [--loss-scale dynamic] "
                 "[--inject-overflow RANK:STEP]\n", argv[0]);
    return 2;
  }
  dist::MpiRuntime runtime(&argc, &argv);
  try {
    return run(runtime.world(), args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);  // one failing rank ends the job (Note [Errors end the job])
  }
}
