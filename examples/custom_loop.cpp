// A custom data-parallel training loop on the Accelerator API (what `hpctrain train` does, by hand):
// gradient accumulation, clipping, a warm-up schedule, exact evaluation with gather_for_metrics and a
// rank-0 checkpoint. Run it like the CLI:
//   mpirun -np 2 custom_loop DATA.h5 CONFIG.json OUTPUT_DIR [EPOCHS] [OPTIM]
// OPTIM is one of `hpctrain train`'s --optim names (adamw_torch, sgd, adafactor, ...): the loop picks the
// optimizer through the train::Optimizer interface (make_optimizer) and never names its type.
// DATA.h5 comes from `hpctrain prep text`; CONFIG.json is a DistilBERT/BERT config (labels are taken
// from the dataset). Not shown here: resume, non-finite checks, metrics files (see src/train/trainer.cpp).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <string>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/evaluation.hpp"
#include "hpctrain/train/optimizer.hpp"
#include "hpctrain/train/schedule.hpp"

using namespace hpctrain;

namespace {

struct Args {
  std::string data, config, output;
  int64_t epochs = 2;
  std::string optim = "adamw_torch";
};

// The model of CONFIG.json with the dataset's labels; every rank seeds alike (rank 0's weights win anyway).
std::shared_ptr<models::SequenceClassifier> build_model(const Args& args) {
  io::HfConfig config = io::HfConfig::load(args.config);
  config.common.set_labels(data::DatasetReader(args.data).label_names());
  torch::manual_seed(1);
  return models::from_config(config);
}

// Accuracy over the whole validation split: predictions and labels of every rank, padding dropped.
double evaluate(train::Accelerator& acc, models::SequenceClassifier& model, loader::ShardLoader& loader) {
  at::NoGradGuard no_grad;
  model.eval();
  std::vector<at::Tensor> hits;
  loader.start_epoch(0);
  while (auto batch = loader.next()) {
    models::ModelInputs inputs = train::to_model_inputs(*batch, acc.device());
    const at::Tensor predicted = model.forward(inputs).logits.argmax(1).cpu();
    const at::Tensor correct = predicted.eq(batch->labels).to(at::kLong).unsqueeze(1);
    hits.push_back(acc.gather_for_metrics(correct, batch->is_padding));
  }
  model.train();
  const at::Tensor all = at::cat(hits);
  return all.sum().item<double>() / static_cast<double>(all.size(0));
}

int run(dist::Comm& comm, const Args& args) {
  train::AcceleratorOptions options;
  options.gradient_accumulation_steps = 2;
  train::Accelerator acc(comm, options);
  auto model = build_model(args);
  acc.prepare_model(*model);  // before the optimizer: the model is on its device now
  // Any optimizer through the train::Optimizer interface; --optim's names (train::optimizer_names()).
  train::OptimizerOptions optimizer_options;
  optimizer_options.optim = args.optim;
  const std::unique_ptr<train::Optimizer> optimizer = train::make_optimizer(optimizer_options, model->named_parameters().pairs());
  loader::LoaderOptions train_data;
  train_data.batch_size = 4, train_data.shuffle = data::ShuffleMode::global, train_data.seed = 1;
  auto train_loader = acc.prepare(*model, *optimizer, args.data, train_data);
  loader::LoaderOptions eval_data;
  eval_data.split = "validation", eval_data.shuffle = data::ShuffleMode::none;
  auto eval_loader = acc.prepare_data(args.data, eval_data);

  const int64_t steps_per_epoch = (train_loader->batches_per_epoch() + 1) / 2;
  const train::LrSchedule schedule{train::ScheduleKind::linear, 1e-3, 2, args.epochs * steps_per_epoch};
  int64_t step = 0;
  model->train();
  for (int64_t epoch = 0; epoch < args.epochs; ++epoch) {
    train_loader->start_epoch(epoch);
    for (int64_t b = 0; auto batch = train_loader->next(); ++b) {
      const bool last_of_epoch = b + 1 == train_loader->batches_per_epoch();
      const bool sync = acc.accumulate(last_of_epoch);
      acc.seed_step(step, b % 2);
      const auto output = model->forward(train::to_model_inputs(*batch, acc.device()));
      acc.backward(output.loss / 2.0);  // mean over the 2 micro-batches of a step
      if (!sync) continue;
      const double norm = acc.clip_grad_norm(1.0);
      optimizer->step(train::learning_rate(schedule, step++));
      acc.zero_grad();
      acc.print("epoch {} step {} loss {:.4f} grad_norm {:.3f}", epoch, step, output.loss.item<double>(), norm);
    }
    acc.print("epoch {}: validation accuracy {:.4f}", epoch, evaluate(acc, *model, *eval_loader));
  }
  acc.save_state(args.output, nlohmann::json{{"global_step", step}});
  acc.print("saved {}", args.output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: mpirun -np N %s DATA.h5 CONFIG.json OUTPUT_DIR [EPOCHS] [OPTIM]\n", argv[0]);
    return 2;
  }
  dist::MpiRuntime runtime(&argc, &argv);
  Args args{argv[1], argv[2], argv[3], argc > 4 ? std::stoll(argv[4]) : 2, argc > 5 ? argv[5] : "adamw_torch"};
  try {
    return run(runtime.world(), args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error: %s\n", runtime.world().rank(), e.what());
    runtime.world().abort(1);  // one failing rank ends the job (Note [Errors end the job])
  }
}
