// run_training (trainer.hpp): set-up, the step loop, evaluation, checkpoints and the final model.
//
// One optimizer step = k micro-batches (k = --gradient-accumulation-steps, fewer at an epoch's end).
// For each micro-batch every rank: reads its batch, reseeds dropout (Note [Dropout seeds]), marks the rows it
// trains on (not padding duplicates, not rows before a resume position: Note [Resume position]), runs the
// objective (Note [Objectives]: the task's loss summed over what it counts), and allreduces (rows, count,
// loss sum, stop request, the step's count) — 40 bytes — so that every rank agrees on a non-finite loss
// before any rank enters backward, and on stopping early (Note [Stop agreement]). The step's k micro-batches
// are read before the first forward, so that the step's count (summed over its micro-batches by each rank,
// over the ranks by the first micro-batch's allreduce) is known before the first backward. The loss it
// back-propagates is local_sum * W / step_count: the gradient reducer averages over W ranks, so the step's
// gradient is that of the mean loss per counted unit over the whole global batch, whatever the number of
// ranks and accumulation steps. The step itself is Accelerator::optimizer_step (Note [The step protocol]). The task is
// the objective's business alone: the loop, the Accelerator and the sinks never name it.
//
// Note [Stop agreement]: a signal (core/stop_request.hpp) or a near time limit (time_limit.hpp) is seen by
// one rank at any moment, so it is never acted on where it arrives. Each micro-batch's forward folds this
// rank's request into the allreduce it runs anyway (the count of ranks asking), so every rank learns in the
// same micro-batch that the run stops, at no extra collective per step; once per run, a max-allreduce of
// core::encode_stop_reason then tells every rank which signal on which rank (for the message). The step
// finishes on every rank (all its micro-batches, the optimizer step, a due evaluation), rank 0 saves
// checkpoint-STEP through the normal save_state path (Local SGD averages first), and run_training returns
// with TrainResult::stopped_by set: no final model, no final evaluation; `hpctrain train` exits with core::kStoppedEarlyExitCode. A request in the run's last step
// lets it finish normally. Testing aid: HPCTRAIN_TEST_SIGNAL_AT=RANK:STEP:COUNT makes that rank raise
// SIGTERM COUNT times at the start of optimizer step STEP (1-based), so that tests stop at a known step.
#include "hpctrain/train/trainer.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/progress.hpp"
#include "hpctrain/core/span.hpp"
#include "hpctrain/core/stop_request.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/io/json_text.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/model_flops.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/evaluation.hpp"
#include "hpctrain/optim/optimizer.hpp"
#include "hpctrain/train/run_agreement.hpp"
#include "hpctrain/train/objective.hpp"
#include "hpctrain/train/optimizer_state_report.hpp"
#include "hpctrain/train/peak_flops.hpp"
#include "hpctrain/train/resume_point.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "hpctrain/train/time_limit.hpp"
#include "hpctrain/train/trainer_state.hpp"
#include "model_setup.hpp"
#include "log/timeline.hpp"
#include "log/training_log.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;  // the --max-time budget (spans time the step's phases)

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// StepTimes from the step's spans (Note [Step spans]): backward's span includes the reducer's "gradient sync"
// (finalize), reported apart as exposed communication together with Local SGD's parameter averaging.
StepTimes step_times(const span::Tally& phases, double total_seconds) {
  StepTimes times;
  times.data_wait = phases.seconds("data wait");
  times.forward = phases.seconds("forward");
  times.backward = phases.seconds("backward") - phases.seconds("gradient sync");
  times.exposed_communication = phases.seconds("gradient sync") + phases.seconds("parameter averaging");
  times.optimizer = phases.seconds("optimizer");
  times.total = total_seconds;
  return times;
}

// Input tokens (attention mask 1) of the rows `keep` marks; 0 for an image batch.
double input_tokens(const loader::Batch& batch, const at::Tensor& keep) {
  if (!batch.attention_mask.defined()) return 0;
  return static_cast<double>(batch.attention_mask.sum(1).masked_fill(keep.logical_not(), 0).sum().item<int64_t>());
}

// "3 labels" for a classifier, "vocabulary 50257" for a causal LM.
std::string head_description(const models::Model& model) {
  if (const auto* classifier = dynamic_cast<const models::SequenceClassifier*>(&model))
    return fmt::format("{} labels", classifier->num_labels());
  if (const auto* lm = dynamic_cast<const models::CausalLM*>(&model)) return fmt::format("vocabulary {}", lm->vocab_size());
  return model.spec().model_type;
}

// HPCTRAIN_TEST_SIGNAL_AT (Note [Stop agreement]): {rank, step, count}; count 0 when unset.
struct TestSignal {
  int rank = 0, count = 0;
  int64_t step = 0;
};
TestSignal test_signal_from_environment() {
  TestSignal out;
  const char* text = std::getenv("HPCTRAIN_TEST_SIGNAL_AT");
  if (text == nullptr || *text == '\0') return out;
  long long step = 0;
  char tail = 0;
  const bool ok = std::sscanf(text, "%d:%lld:%d%c", &out.rank, &step, &out.count, &tail) == 3 && step >= 1 &&
                  out.count >= 1;
  HPCTRAIN_CHECK(ok, "HPCTRAIN_TEST_SIGNAL_AT '{}': expected RANK:STEP:COUNT (step, count >= 1)", text);
  out.step = step;
  return out;
}

// The parameters that train (Note [LoRA]: frozen ones get no optimizer state, as they get no reducer bucket).
optim::NamedParameters trainable_parameters(const torch::nn::Module& model) {
  optim::NamedParameters out;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) out.emplace_back(item.key(), item.value());
  return out;
}

struct Run {
  const TrainOptions& options;
  dist::Comm& comm;
  Accelerator acc;
  std::unique_ptr<data::DatasetReader> dataset;
  ModelSetup setup;
  models::WeightGradients weight_gradients;  // Note [Model FLOPs]: which weights train (LoRA: the adapters)
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<Objective> objective;  // the task (Note [Objectives])
  std::unique_ptr<loader::ShardLoader> train_loader, eval_loader;
  RunFolder folder;  // Note [One run per folder]: rank 0 holds its lock until the run ends
  TrainerState state;
  StartPlan plan;
  std::unique_ptr<TrainingLog> report;
  std::ofstream trace;
  int64_t total = 0;
  int64_t last_eval_step = -1;
  bool inject_overflow = false;  // --inject-overflow
  InjectedOverflow overflow_at;
  bool best_is_current = false;  // the last evaluation set best_metric
  bool sync_check_due = false;   // --check-sync-every came due; with Local SGD it waits for the next average
  std::optional<Evaluation> last_eval;
  // Stopping early (Note [Stop agreement]).
  Clock::time_point run_start;  // of run_training: --max-time counts the set-up too
  double time_budget_seconds = 0;
  StopMargin margin;
  core::StopReason stop;  // agreed: the same on every rank
  int64_t last_save_step = -1;
  TestSignal test_signal;

  Run(dist::Comm& c, const TrainOptions& o) : options(o), comm(c), acc(c, o.accelerator), run_start(Clock::now()) {
    inject_overflow = !o.inject_overflow.empty();
    if (inject_overflow) overflow_at = parse_injected_overflow(o.inject_overflow);
    const double now_epoch = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    time_budget_seconds = time_budget(o.max_time.empty() ? 0 : parse_duration(o.max_time),
                                      std::getenv("SLURM_JOB_END_TIME"), now_epoch);
    test_signal = test_signal_from_environment();
  }
  // Stopping before the run's end: the step that saw the request is done and saved (finish() returns).
  [[nodiscard]] bool stopping() const { return stop.any() && state.global_step < total; }
  [[nodiscard]] core::StopReason local_stop_request() const;
  void limit_to_slurm_time_left();
  void set_up();
  ResumePoint open_run();
  void build(const ResumePoint& resume);
  void start_reports();
  void print_plan();
  void measure_peak();
  void train_epoch(int64_t epoch, int64_t first_batch, int64_t resume_skip);
  // A step's micro-batches as read, with the rows each trains on and the step's count on this rank.
  struct StepBatches {
    std::vector<loader::Batch> batches;
    std::vector<at::Tensor> keep;  // bool [B] (CPU): rows trained on (not padding, not before the resume position)
    std::vector<double> tokens;    // input tokens (not padding) of the kept rows, per micro-batch (0 for images)
    double local_count = 0;        // Objective::count summed over the micro-batches
  };
  struct MicroBatch {
    at::Tensor local_sum;  // this rank's loss summed over what the objective counts (device scalar, with grad)
    double global_rows = 0, global_count = 0, global_loss_sum = 0;  // summed over ranks
    double step_count = 0;  // the step's count over all ranks (the first micro-batch's allreduce carries it)
    double global_tokens = 0;
    bool local_nonfinite = false, any_nonfinite = false;
    core::StopReason stop;  // agreed over ranks (Note [Stop agreement])
  };
  // A step's micro-batches, summed over ranks; `skip` when a non-finite loss skips the step.
  struct StepTotals {
    double rows = 0, count = 0, loss_sum = 0, tokens = 0;
    bool skip = false;
  };
  [[nodiscard]] at::Tensor kept_rows(const loader::Batch& batch, int64_t batch_index, int64_t resume_skip) const;
  StepBatches read_step(int64_t epoch, int64_t first_batch, int64_t micro_batches, int64_t resume_skip,
                        span::Tally& phases);
  MicroBatch forward(const loader::Batch& batch, const at::Tensor& keep, double tokens, double step_local_count);
  void on_nonfinite(bool local_nonfinite, int64_t epoch);
  void trace_rows(const loader::Batch& batch, const at::Tensor& keep, int64_t epoch);
  void step(int64_t epoch, int64_t batch, int64_t micro_batches, int64_t resume_skip, bool epoch_ends);
  StepTotals run_micro_batches(int64_t epoch, int64_t first_batch, int64_t micro_batches, int64_t resume_skip,
                               span::Tally& phases);
  void backward(const MicroBatch& micro, double step_count, int64_t micro_index, int64_t micro_batches,
                span::Tally& phases);
  void synchronize_if_due(bool epoch_ends);
  void record_step(const StepTotals& totals, const StepOutcome& outcome, const StepTimes& times, int64_t bytes);
  [[nodiscard]] bool evaluation_due(int64_t step, bool epoch_ended) const;
  [[nodiscard]] bool checkpoint_due(int64_t step, bool epoch_ended) const;
  void after_step(bool epoch_ended);
  void evaluate_now();
  void save_checkpoint();
  TrainResult finish(double seconds, int64_t samples);
};

// Under a Slurm that does not set SLURM_JOB_END_TIME, rank 0 asks squeue once for the job's time left and
// every rank takes it into its budget (one query per job, not per rank).
void Run::limit_to_slurm_time_left() {
  double left = -1;
  if (comm.is_main_process()) left = slurm_time_left().value_or(-1);
  comm.broadcast(&left, sizeof left, 0);
  if (left < 0) return;
  time_budget_seconds = std::min(time_budget_seconds, since(run_start) + left);
  log::info("Slurm job {}: {} s left (squeue); the run saves a checkpoint and stops before the time runs out",
            std::getenv("SLURM_JOB_ID") ? std::getenv("SLURM_JOB_ID") : "?", static_cast<int64_t>(left));
}

void Run::set_up() {
  const ResumePoint resume = open_run();
  build(resume);
  start_reports();
}

// The dataset, the agreed options, the run folder, the resume point and the plan: what decides the run.
ResumePoint Run::open_run() {
  dist::run_collectively(comm, "opening the dataset", [&] {
    dataset = std::make_unique<data::DatasetReader>(options.data);
    // A task without an objective fails here, before the run folder exists.
    objective = make_objective(*dataset, options.loss_chunk_tokens);
    (void)check_model_config(options, *dataset);  // so does a model of another kind (a classifier on a causal-lm file)
  });
  agree_on_train_run(comm, options, *dataset);  // Note [Agreed options]: before any value-dependent collective
  limit_to_slurm_time_left();
  // Only the default evaluation split is optional (`hpctrain train --help`). Checked before the run folder
  // is claimed: a mistyped option leaves the folder untouched.
  HPCTRAIN_CHECK(!options.eval_split_required || dataset->has_split(options.eval_split),
                 "--eval-split '{}': '{}' has no such split; it has: {}", options.eval_split, options.data.string(),
                 fmt::join(dataset->splits(), ", "));
  folder = claim_run_folder(comm, options.output,
                            FolderClaim{options.resume, options.overwrite_output_dir, extra_run_outputs(options)});
  ResumePoint resume = find_resume_point(comm, options.resume, options.output, folder.identity);
  RunGeometry requested;
  requested.world_size = comm.world_size(), requested.per_rank_batch = options.batch_size;
  requested.accumulation = options.accelerator.gradient_accumulation_steps, requested.shuffle = options.shuffle;
  requested.seed = options.accelerator.seed, requested.train_examples = dataset->split_info(options.train_split).num_examples;
  plan = plan_start(resume.state ? &*resume.state : nullptr, requested);
  objective->check_trainable(*dataset);
  return resume;
}

// The model (rank 0's weights, or the checkpoint's), the optimizer, the state and the loaders.
void Run::build(const ResumePoint& resume) {
  TrainOptions seeded = options;
  seeded.accelerator.seed = plan.geometry.seed;  // the checkpoint's seed wins: same weights init, order and dropout
  acc.set_seed(plan.geometry.seed);              // Note [Dropout seeds]: and the same dropout masks
  dist::run_collectively(comm, "building the model", [&] { setup = build_model(seeded, *dataset, comm.world_size()); });
  acc.prepare_model(*setup.model);
  weight_gradients = models::weight_gradients(*setup.model);
  acc.set_tokenizer_files(setup.tokenizer_files);
  if (setup.lora) acc.set_model_files(setup.lora);  // Note [LoRA]: checkpoints hold the adapter only
  optimizer = acc.make_optimizer(options.optimizer, trainable_parameters(*setup.model));  // ZeRO: sharded
  if (resume.state) {
    acc.load_tensors(resume.dir);  // verified by find_resume_point
    state = *resume.state;
  }
  state.run_id = folder.identity.run_id;
  loader::LoaderOptions train_options;
  train_options.split = options.train_split, train_options.batch_size = plan.geometry.per_rank_batch;
  train_options.shuffle = plan.geometry.shuffle, train_options.seed = plan.geometry.seed;
  train_options.cache_bytes = options.cache_mb << 20;
  train_loader = acc.prepare_data(options.data, train_options);
  if (dataset->has_split(options.eval_split)) {
    loader::LoaderOptions eval_options;
    eval_options.split = options.eval_split, eval_options.shuffle = data::ShuffleMode::none;
    eval_options.cache_bytes = options.cache_mb << 20;
    eval_options.batch_size = options.eval_batch_size > 0 ? options.eval_batch_size : options.batch_size;
    eval_loader = acc.prepare_data(options.data, eval_options);
  }
}

// The step count and schedule, then metrics.jsonl and the other sinks (only now: Note [Never start over
// silently]), the example trace and the notes of the set-up.
void Run::start_reports() {
  total = total_steps(plan, options.epochs, options.max_steps);
  state.global_step = plan.global_step, state.position = plan.position, state.geometry = plan.geometry;
  state.schedule = LrSchedule{parse_schedule(options.lr_scheduler), options.lr,
                              options.warmup_steps > 0 ? options.warmup_steps
                                                       : warmup_steps_from_ratio(options.warmup_ratio, total),
                              std::max<int64_t>(1, total)};
  state.max_steps = total, state.num_train_epochs = options.epochs, state.logging_steps = options.logging_steps;
  state.eval_steps = options.eval_steps, state.save_steps = options.save_steps;
  if (comm.is_main_process()) remove_stale_temporaries(options.output);
  report = std::make_unique<TrainingLog>(options, comm.is_main_process(), state.global_step, total);
  if (!options.trace_examples.empty()) {
    fs::create_directories(options.trace_examples);
    const fs::path file = options.trace_examples / fmt::format("examples-rank{}.txt", comm.rank());
    trace.open(file, std::ios::app);
    HPCTRAIN_CHECK(trace.good(), "--trace-examples: cannot open '{}' for appending", file.string());
  }
  for (const std::string& note : setup.notes) log::info("model: {}", note);
  for (const std::string& note : plan.notes) log::info("resume: {}", note);
  for (const std::string& note : folder.notes) log::info("{}", note);
}

void Run::print_plan() {
  const RunGeometry& g = plan.geometry;
  int64_t parameters = 0;
  for (const auto& p : setup.model->parameters()) parameters += p.numel();
  log::info("model: {} ({} parameters, {}) on {} with {} CPU thread(s) per rank", setup.model->spec().architecture,
            parameters, head_description(*setup.model), acc.device().str(), acc.threads());
  log::info("global batch {} = {} per rank x {} rank(s) x {} accumulation step(s); {} train examples, {} steps per epoch, "
            "{} steps in all (--shuffle {})", g.global_batch(), g.per_rank_batch, g.world_size, g.accumulation,
            g.train_examples, g.steps_per_epoch(), total, data::to_string(g.shuffle));
  log::info("optimizer: {} {}, {:.1f} MiB of state per rank", optimizer->type(), optimizer->hyperparameters().dump(),
            static_cast<double>(optimizer->state_bytes()) / (1 << 20));
  if (options.optimizer.adafactor_relative_step && optimizer->type() == "adafactor")
    log::info("optimizer: Adafactor's relative step size: --lr and the schedule are not used (the lr logged is theirs)");
  log::info("gradients: {} bucket(s), overlap {}", acc.reducer().buckets().size(), acc.reducer().overlap() ? "on" : "off");
  if (plan.global_step > 0)
    log::info("resuming at step {} (epoch {}, sample {} of the epoch)", plan.global_step, plan.position.epoch,
              plan.position.samples_in_epoch);
}

// MFU's denominator (Note [Model FLOPs]): --peak-tflops, or every rank's matrix products measured at once (as
// they will run) in the forward's dtype; the slowest rank's peak, times the ranks. Only for models with FLOPs.
void Run::measure_peak() {
  if (!models::training_flops_per_token(setup.model->config(), 1)) return;
  const c10::ScalarType dtype = acc.precision().autocast_dtype().value_or(at::kFloat);
  double peak = options.peak_tflops * 1e12;
  if (peak <= 0) peak = comm.allreduce_value(measure_peak_flops(acc.device(), dtype), dist::ReduceOp::min);
  report->set_peak_flops(peak * comm.world_size(), options.peak_tflops <= 0);
  log::info("MFU: against a peak of {:.1f} GFLOP/s per rank ({} matrix products{})", peak / 1e9, c10::toString(dtype),
            options.peak_tflops > 0 ? ", --peak-tflops" : ", measured");
}

void Run::train_epoch(int64_t epoch, int64_t first_batch, int64_t resume_skip) {
  train_loader->start_epoch(epoch, first_batch);
  const int64_t batches = train_loader->batches_per_epoch();
  for (int64_t batch = first_batch; batch < batches && state.global_step < total && !stopping();) {
    const int64_t micro = std::min(plan.geometry.accumulation, batches - batch);
    step(epoch, batch, micro, resume_skip, batch + micro == batches);
    batch += micro;
    if (batch == batches) state.position = DataPosition{epoch + 1, 0};
    after_step(batch == batches);
    if (stopping() && last_save_step != state.global_step) save_checkpoint();
  }
}

// This rank's reason to stop now, if any: a signal, or too little time left for another step and a save.
core::StopReason Run::local_stop_request() const {
  core::StopReason reason;
  reason.rank = comm.rank();
  reason.signo = core::stop_signal();
  reason.time_limit = time_to_stop(since(run_start), time_budget_seconds, margin);
  return reason;
}

// Rows of `batch` trained on: not padding duplicates, not before the resume position (Note [Resume position]).
at::Tensor Run::kept_rows(const loader::Batch& batch, int64_t batch_index, int64_t resume_skip) const {
  const RunGeometry& g = plan.geometry;
  at::Tensor keep = batch.is_padding.logical_not().contiguous();
  auto keep_row = keep.accessor<bool, 1>();
  if (batch_index * g.per_rank_batch * g.world_size < resume_skip) {
    for (int64_t row = 0; row < batch.size(); ++row)
      if (before_position(g, comm.rank(), batch_index, row, resume_skip)) keep_row[row] = false;
  }
  return keep;
}

// Forward of one micro-batch through the objective (Note [Objectives]) and the 48-byte agreement on (rows,
// counted units, loss sum, ranks asking to stop, the step's count: this rank's in the first micro-batch, 0
// after; input tokens). A rank's non-finite loss makes the summed loss non-finite on every rank, so the sum
// is also the agreement on it.
Run::MicroBatch Run::forward(const loader::Batch& batch, const at::Tensor& keep, double tokens, double step_local_count) {
  MicroBatch out;
  const MicroBatchLoss loss = objective->loss(*setup.model, batch, keep, acc);
  out.local_sum = loss.sum;
  const double local_value = out.local_sum.item<double>();
  out.local_nonfinite = !std::isfinite(local_value);
  const core::StopReason request = local_stop_request();
  double stats[6] = {static_cast<double>(keep.sum().item<int64_t>()), loss.count, local_value,
                     request.any() ? 1.0 : 0.0, step_local_count, tokens};
  comm.allreduce(stats, 6);
  out.global_rows = stats[0], out.global_count = stats[1], out.global_loss_sum = stats[2], out.step_count = stats[4];
  out.global_tokens = stats[5];
  out.any_nonfinite = !std::isfinite(out.global_loss_sum);
  // Once per run, when some rank asked: which reason (one more collective, on every rank at once).
  if (stats[3] > 0 && !stop.any())
    out.stop = core::decode_stop_reason(comm.allreduce_value(core::encode_stop_reason(request), dist::ReduceOp::max));
  return out;
}

// Every rank saw a non-finite loss somewhere: stop everywhere with the same message, or skip the step.
void Run::on_nonfinite(bool local_nonfinite, int64_t epoch) {
  const auto flags = comm.allgather_value<int32_t>(local_nonfinite ? 1 : 0);
  std::vector<int> ranks;
  for (int r = 0; r < comm.world_size(); ++r)
    if (flags[static_cast<std::size_t>(r)] != 0) ranks.push_back(r);
  HPCTRAIN_CHECK(options.skip_nonfinite, "step {} (epoch {}): the loss is not finite on rank(s) {}; stopping on every "
                 "rank\n  hint: lower --lr (now {}), check the data, or pass --skip-nonfinite to skip such steps",
                 state.global_step + 1, epoch, fmt::join(ranks, ", "), options.lr);
  report->info(fmt::format("warning: step {}: the loss is not finite on rank(s) {}; the step is skipped on every rank "
                           "(--skip-nonfinite)", state.global_step + 1, fmt::join(ranks, ", ")));
}

void Run::trace_rows(const loader::Batch& batch, const at::Tensor& keep, int64_t epoch) {
  const auto index = batch.example_index.accessor<int64_t, 1>();
  const auto keep_row = keep.accessor<bool, 1>();
  for (int64_t row = 0; row < batch.size(); ++row)
    if (keep_row[row]) trace << epoch << ' ' << state.global_step + 1 << ' ' << index[row] << '\n';
}

// Note [Step spans]: the step's phases are spans (core/span.hpp) summed in `phases`; StepTimes is read
// from it, so metrics.jsonl and the --timeline trace show the same intervals.
void Run::step(int64_t epoch, int64_t first_batch, int64_t micro_batches, int64_t resume_skip, bool epoch_ends) {
  if (test_signal.count > 0 && test_signal.rank == comm.rank() && test_signal.step == state.global_step + 1)
    for (int i = 0; i < test_signal.count; ++i) std::raise(SIGTERM);  // Note [Stop agreement]: test hook
  span::Span whole_step("step", "train", state.global_step + 1);
  span::Tally phases;
  const int64_t bytes_before = comm.bytes_sent();
  const StepTotals totals = run_micro_batches(epoch, first_batch, micro_batches, resume_skip, phases);
  span::Span optimizer_span("optimizer", "train", -1, &phases);
  const double lr = learning_rate(state.schedule, state.global_step);
  // Note [The step protocol]: unscale, agree on overflow, clip, step, update the scale, zero the gradients.
  const StepOutcome outcome = totals.skip ? acc.skip_step(lr) : acc.optimizer_step(lr, options.max_grad_norm);
  if (outcome.result == StepOutcome::Result::skipped_overflow)
    report->info(fmt::format("step {}: the gradients hold inf/NaN (loss scaling); the step is skipped on every rank, "
                             "loss scale now {}", state.global_step + 1, outcome.loss_scale.value_or(0)));
  optimizer_span.stop();
  span::Span averaging("parameter averaging", "communication", -1, &phases);
  synchronize_if_due(epoch_ends);
  averaging.stop();
  const StepTimes times = step_times(phases, whole_step.stop());
  record_step(totals, outcome, times, comm.bytes_sent() - bytes_before);
}

// The step's micro-batches, read before any forward (Note [Objectives]), with their kept rows and counts.
Run::StepBatches Run::read_step(int64_t epoch, int64_t first_batch, int64_t micro_batches, int64_t resume_skip,
                                span::Tally& phases) {
  const RunGeometry& g = plan.geometry;
  StepBatches out;
  for (int64_t i = 0; i < micro_batches; ++i) {
    const int64_t batch_index = first_batch + i;
    span::Span data_wait("data wait", "train", batch_index, &phases);
    auto batch = train_loader->next();
    data_wait.stop();
    HPCTRAIN_CHECK(batch.has_value(), "the loader ended epoch {} before batch {}", epoch, batch_index);
    state.position = DataPosition{epoch, (batch_index * g.per_rank_batch + batch->size()) * g.world_size};
    out.keep.push_back(kept_rows(*batch, batch_index, resume_skip));
    out.local_count += objective->count(*batch, out.keep.back());
    out.tokens.push_back(input_tokens(*batch, out.keep.back()));
    out.batches.push_back(std::move(*batch));
  }
  return out;
}

// The step's micro-batches: data, forward (through the objective), the agreement, backward.
Run::StepTotals Run::run_micro_batches(int64_t epoch, int64_t first_batch, int64_t micro_batches, int64_t resume_skip,
                                       span::Tally& phases) {
  const StepBatches step = read_step(epoch, first_batch, micro_batches, resume_skip, phases);
  StepTotals totals;
  double step_count = 0;
  for (int64_t i = 0; i < micro_batches && !totals.skip; ++i) {  // a non-finite micro-batch skips the rest
    const auto at = static_cast<std::size_t>(i);
    acc.set_gradient_sync(i + 1 == micro_batches);
    span::Span forward_span("forward", "train", i, &phases);
    acc.seed_step(state.global_step, i);
    const MicroBatch micro = forward(step.batches[at], step.keep[at], step.tokens[at], i == 0 ? step.local_count : 0.0);
    forward_span.stop();
    if (i == 0) step_count = micro.step_count;
    if (micro.stop.any()) stop = micro.stop;
    if (micro.any_nonfinite) {
      on_nonfinite(micro.local_nonfinite, epoch);
      totals.skip = true;
      continue;
    }
    backward(micro, step_count, i, micro_batches, phases);
    totals.loss_sum += micro.global_loss_sum, totals.count += micro.global_count, totals.rows += micro.global_rows;
    totals.tokens += micro.global_tokens;
    if (trace.is_open()) trace_rows(step.batches[at], step.keep[at], epoch);
  }
  return totals;
}

// Backward of the local loss sum, scaled so that once the reducer averages over W ranks the gradient is that
// of the mean over the step's counted units on all ranks (Note [Objectives]).
void Run::backward(const MicroBatch& micro, double step_count, int64_t micro_index, int64_t micro_batches,
                   span::Tally& phases) {
  const RunGeometry& g = plan.geometry;
  double scale = g.world_size / std::max(1.0, step_count);
  if (inject_overflow && micro_index + 1 == micro_batches && overflow_at == InjectedOverflow{comm.rank(), state.global_step + 1})
    scale = std::numeric_limits<double>::infinity();  // --inject-overflow: this rank's gradients become inf
  span::Span backward_span("backward", "train", micro_index, &phases);
  acc.backward(micro.local_sum * scale);  // with gradient sync, finalize's "gradient sync" span nests in it
  backward_span.stop();
  if (acc.sync_gradients()) phases.add("gradient sync", acc.reducer().last_step_stats().exposed_seconds);
}

// Local SGD: every K steps, and before an evaluation or a checkpoint (they see averaged parameters).
void Run::synchronize_if_due(bool epoch_ends) {
  (void)acc.local_sgd_step();
  const int64_t next = state.global_step + 1;
  if (evaluation_due(next, epoch_ends) || checkpoint_due(next, epoch_ends) || stop.any()) acc.synchronize_parameters();
}

void Run::record_step(const StepTotals& totals, const StepOutcome& outcome, const StepTimes& times, int64_t bytes) {
  margin.longest_step = std::max(margin.longest_step, times.total);
  ++state.global_step;
  if (!outcome.stepped()) ++state.skipped_steps;
  state.samples_seen += static_cast<int64_t>(totals.rows);
  const double loss = totals.skip || totals.count == 0 ? std::nan("") : totals.loss_sum / totals.count;  // null in metrics.jsonl
  StepRecord record{state.global_step, state.epoch_float(), loss, outcome.lr, outcome.grad_norm,
                    static_cast<int64_t>(totals.rows), times, !outcome.stepped(), outcome.loss_scale};
  record.comm_bytes = bytes;
  if (report->logs_step(record.step, record.skipped)) {  // on every rank: Note [Optimizer state bytes]
    const LargestStateBytes largest = largest_state_bytes(comm, *optimizer, acc.model_state_bytes());
    record.optimizer_state_bytes = largest.optimizer;
    record.model_state_bytes = largest.model;
    record.model_bytes = models::model_bytes(*setup.model);  // a 4-bit base counted at its bytes
  }
  record.tokens = static_cast<int64_t>(totals.tokens);
  if (totals.rows > 0) {  // Note [Model FLOPs], at the step's mean row length
    const auto per_token = models::training_flops_per_token(setup.model->config(), totals.tokens / totals.rows, weight_gradients);
    record.flops = per_token.value_or(0) * totals.tokens;
  }
  if (const auto entry = report->add_step(record); !entry.is_null()) state.log_history.push_back(entry);
}

bool Run::evaluation_due(int64_t s, bool epoch_ended) const {
  return eval_loader && (options.eval_steps > 0 ? s % options.eval_steps == 0 : epoch_ended);
}

bool Run::checkpoint_due(int64_t s, bool epoch_ended) const {
  return (options.save_steps > 0 ? s % options.save_steps == 0 : epoch_ended) || s == total;
}

void Run::after_step(bool epoch_ended) {
  const int64_t s = state.global_step;
  const bool evaluate = evaluation_due(s, epoch_ended), save = checkpoint_due(s, epoch_ended);
  sync_check_due = sync_check_due || (options.check_sync_every > 0 && s % options.check_sync_every == 0);
  if (sync_check_due && acc.parameters_synchronized()) {
    sync_check_due = false;
    ddp::NamedTensors named;
    for (const auto& item : setup.model->named_parameters()) named.emplace_back(item.key(), item.value());
    std::string differs;
    acc.with_whole_model([&] { differs = ddp::find_unsynchronized(comm, named); });
    HPCTRAIN_CHECK(differs.empty(), "step {}: the replicas differ: parameter '{}' is not the same on every rank "
                   "(--check-sync-every {})", s, differs, options.check_sync_every);
  }
  if (evaluate) evaluate_now();
  if (save) save_checkpoint();
}

void Run::evaluate_now() {
  const span::Span evaluation("evaluation", "train", state.global_step);
  last_eval = objective->evaluate(*setup.model, *eval_loader,
                                  eval_context(acc, options.skip_nonfinite ? NonFinite::count : NonFinite::fail));
  last_eval_step = state.global_step;
  state.log_history.push_back(report->add_eval(state.global_step, state.epoch_float(), last_eval->metrics));
  const std::optional<double> score = last_eval->metrics.score(objective->best_metric());
  best_is_current = score && objective->improves(*score, state.best_metric);
  if (best_is_current) state.best_metric = score;
}

void Run::save_checkpoint() {
  const span::Span checkpoint("checkpoint", "train", state.global_step);
  const fs::path dir = options.output / checkpoint_name(state.global_step);
  const auto owned = [&](const std::optional<std::string>& id) { return owns(folder.identity, id); };
  dist::run_collectively(comm, fmt::format("making room for '{}'", dir.string()), [&] {
    if (!comm.is_main_process() || !fs::exists(dir)) return;
    const CheckpointOwner owner = checkpoint_owner(dir, folder.identity);
    if (owner == CheckpointOwner::this_run) return;  // replaced whole by the save (Note [Complete checkpoints])
    if (owner == CheckpointOwner::this_run_damaged) {  // Note [Never start over silently]: kept, as damaged
      const fs::path aside = move_aside(dir, fmt::format("{}-{}", folder.identity.run_id, std::time(nullptr)), "damaged");
      report->info(fmt::format("this run's damaged {} is now {} (never removed)", dir.filename().string(),
                               aside.filename().string()));
      return;
    }
    const fs::path aside = move_aside(dir, checkpoint_run_id(dir).value_or("unmarked-" + folder.identity.run_id));
    report->info(fmt::format("another run's {} is now {} (never removed)", dir.filename().string(), aside.filename().string()));
  });
  if (best_is_current && last_eval_step == state.global_step) state.best_model_checkpoint = dir.string();
  span::Span save("save state", "train", state.global_step);
  acc.save_state(dir, to_json(state));
  margin.last_save = save.stop();  // the next --max-time decision keeps room for a save this long
  last_save_step = state.global_step;
  if (comm.is_main_process()) {
    for (const fs::path& removed : rotate_checkpoints(options.output, options.save_total_limit, owned))
      report->info(fmt::format("removed {} (--save-total-limit {})", removed.filename().string(), options.save_total_limit));
  }
  report->info(fmt::format("saved {}", dir.string()));
}

TrainResult Run::finish(double seconds, int64_t samples) {
  const bool stopped = stopping();
  if (eval_loader && last_eval_step != state.global_step && !stopped) evaluate_now();
  report->finish();
  TrainResult result;
  result.global_step = state.global_step, result.start_step = plan.global_step, result.seconds = seconds;
  result.samples_seen = samples;
  result.samples_per_second = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
  if (stopped) {  // Note [Stop agreement]: the checkpoint of this step is the run's state; no final model
    result.stopped_by = core::describe(stop);
    result.checkpoint_dir = options.output / checkpoint_name(state.global_step);
    return result;
  }
  result.final_dir = options.output / kFinalName;
  if (setup.lora) {
    acc.with_whole_model([&] {  // --zero-stage 3: gathered for rank 0 to write
      dist::run_collectively(comm, "saving the final model", [&] {  // Note [LoRA]: final/ is a PEFT adapter folder
        if (comm.is_main_process())
          setup.lora->save_final(options.output, setup.tokenizer_files, options.merge_lora, parse_save_dtype(options.save_dtype));
      });
    });
  } else {  // Note [Streamed writes]: --zero-stage 3 gathers one unit at a time for rank 0 to write
    acc.save_pretrained(*setup.model, result.final_dir, setup.tokenizer_files, parse_save_dtype(options.save_dtype));
  }
  dist::run_collectively(comm, "saving the final model", [&] {
    if (comm.is_main_process()) io::write_file_atomically(options.output / kTrainerStateName, to_json(state).dump(2) + "\n");
  });
  log::info("done: {} steps in {} ({:.1f} samples/s); final model in {}", state.global_step, format_duration(seconds),
            result.samples_per_second, result.final_dir.string());
  if (last_eval) {
    result.eval = last_eval->metrics;
    result.majority_baseline = last_eval->baseline.value_or(0);
    log::info("{}: {}", options.eval_split, objective->describe(*last_eval));
  }
  return result;
}

}  // namespace

TrainResult run_training(dist::Comm& comm, const TrainOptions& options) {
  span::name_this_thread("main");
  validate_train_options(options);
  Run run(comm, options);
  run.set_up();
  run.print_plan();
  run.measure_peak();
  run.setup.model->train();
  Timeline timeline(comm, options.timeline);  // after set_up: the option is agreed (Note [Agreed options])
  span::Span training("training", "train");
  const int64_t samples_before = run.state.samples_seen;
  int64_t first_batch = run.plan.first_batch, resume_skip = run.plan.position.samples_in_epoch;
  for (int64_t epoch = run.plan.position.epoch; run.state.global_step < run.total && !run.stopping(); ++epoch) {
    run.train_epoch(epoch, first_batch, resume_skip);
    first_batch = 0, resume_skip = 0;
  }
  TrainResult result = run.finish(training.stop(), run.state.samples_seen - samples_before);
  timeline.write();
  return result;
}

}  // namespace hpctrain::train
