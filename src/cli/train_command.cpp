// `hpctrain train`: grouped option descriptions -> train::TrainOptions -> train::run_training.
// Every flag is also a key of --config FILE (`key = value` lines; the command line wins).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/core/stop_request.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/optim/optimizer_options.hpp"
#include "hpctrain/train/trainer.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

constexpr const char* kUsage =
    "mpirun -np N hpctrain train (--model DIR | --model-config FILE|preset:NAME) --data FILE.h5 --output DIR [options]";

struct Texts {  // options parsed as text, converted after parsing
  std::string data, model, tokenizer, output, shuffle = "shard", overlap = "on", mixed_precision = "no",
      loss_scale = "auto", grad_reduce_dtype;  // grad_reduce_dtype: its default comes from AcceleratorOptions
};

po::options_description data_group(train::TrainOptions& o, Texts& t) {
  po::options_description g("Data");
  g.add_options()
      ("data", po::value(&t.data)->required(), "dataset file written by `hpctrain prep` (.h5)")
      ("train-split", po::value(&o.train_split)->default_value(o.train_split), "split to train on")
      ("eval-split", po::value(&o.eval_split)->default_value(o.eval_split),
       "split to evaluate on; the default is skipped when the file has no validation split, an explicit "
       "--eval-split must exist in the file")
      ("shuffle", po::value(&t.shuffle)->default_value(t.shuffle),
       "shard | global | none; global gives the same global batches on any number of ranks (exact resume on a "
       "different number of ranks)")
      ("cache-mb", po::value(&o.cache_mb)->default_value(o.cache_mb),
       "MiB of examples each rank keeps in memory; a larger shard is streamed in blocks (block shuffle)")
      ("tokenizer", po::value(&t.tokenizer), "tokenizer folder the data was prepared with, copied into checkpoints "
       "(default: --model's tokenizer files)");
  return g;
}

po::options_description model_group(train::TrainOptions& o, Texts& t) {
  po::options_description g("Model");
  g.add_options()
      ("model", po::value(&t.model), "Hugging Face model folder to fine-tune (config.json + model.safetensors)")
      ("model-config", po::value(&o.model_config), "config.json to train from random init, or preset:NAME "
       "(tiny-distilbert, tiny-bert, cnn, mlp; for a causal-lm dataset from `prep lm`: tiny-gpt2, tiny-llama); sizes "
       "follow the dataset")
      ("gradient-checkpointing", po::bool_switch(&o.accelerator.gradient_checkpointing), "keep only each transformer layer's input "
       "and recompute the layer in backward: less activation memory for about one more forward (DistilBERT, BERT, GPT-2, "
       "Llama, Qwen2)")
      ("lora-r", po::value(&o.lora_r)->default_value(o.lora_r), "LoRA: train adapters of this rank on the frozen --model "
       "(PEFT's LoRA; 0 = full fine-tuning); OUTPUT/final is then a PEFT adapter folder")
      ("lora-alpha", po::value(&o.lora_alpha)->default_value(o.lora_alpha), "LoRA scaling alpha (the delta is scaled by alpha / r)")
      ("lora-dropout", po::value(&o.lora_dropout)->default_value(o.lora_dropout), "dropout on the adapters' input")
      ("lora-target-modules", po::value(&o.lora_target_modules), "comma list of the HF model's module names to adapt "
       "(q_lin,v_lin DistilBERT; query,value BERT; c_attn GPT-2; q_proj,v_proj Llama/Qwen2 - the defaults) or all-linear")
      ("lora-modules-to-save", po::value(&o.lora_modules_to_save)->default_value(o.lora_modules_to_save),
       "comma list of modules trained whole and saved with the adapter; auto: PEFT's (classifier, score) for a "
       "classifier, none for a causal LM; none")
      ("merge-lora", po::bool_switch(&o.merge_lora), "also write OUTPUT/final-merged: the base with the adapter merged "
       "(a transformers model folder)");
  return g;
}

po::options_description optimization_group(train::TrainOptions& o, Texts& t) {
  po::options_description g("Optimization");
  g.add_options()
      ("epochs", po::value(&o.epochs)->default_value(o.epochs), "passes over the train split")
      ("max-steps", po::value(&o.max_steps)->default_value(o.max_steps), "optimizer steps of the run (> 0 overrides --epochs)")
      ("batch-size", po::value(&o.batch_size)->default_value(o.batch_size),
       "examples per rank per micro-batch; global batch = this x ranks x accumulation steps")
      ("eval-batch-size", po::value(&o.eval_batch_size)->default_value(0), "examples per rank in evaluation (0: --batch-size)")
      ("gradient-accumulation-steps", po::value(&o.accelerator.gradient_accumulation_steps)->default_value(1), "micro-batches per step")
      ("lr", po::value(&o.lr)->default_value(o.lr), "peak learning rate of the schedule")
      ("warmup-ratio", po::value(&o.warmup_ratio)->default_value(o.warmup_ratio), "share of the steps warming up")
      ("warmup-steps", po::value(&o.warmup_steps)->default_value(o.warmup_steps), "steps warming up (instead of the ratio)")
      ("lr-scheduler", po::value(&o.lr_scheduler)->default_value(o.lr_scheduler), "linear | cosine | constant")
      ("max-grad-norm", po::value(&o.max_grad_norm)->default_value(o.max_grad_norm), "clip the global gradient norm (<= 0: off)")
      ("seed", po::value(&o.accelerator.seed)->default_value(o.accelerator.seed), "seed of the weights, data order and dropout")
      ("skip-nonfinite", po::bool_switch(&o.skip_nonfinite), "skip steps whose loss is NaN/inf (default: stop)")
      ("mixed-precision", po::value(&t.mixed_precision)->default_value(t.mixed_precision),
       "no | bf16 | fp16: autocast of forward and loss; weights, gradients and optimizer state stay fp32 "
       "(fp16 needs --device cuda)")
      ("loss-scale", po::value(&t.loss_scale)->default_value(t.loss_scale),
       "auto (dynamic loss scaling with fp16) | dynamic (also with bf16 / fp32: tests the scaler on a CPU)");
  return g;
}

}  // namespace

po::options_description optimizer_group(optim::OptimizerOptions& o) {
  po::options_description g("Optimizer");
  g.add_options()
      ("optim", po::value(&o.optim)->default_value(o.optim),
       fmt::format("optimizer, Hugging Face Trainer's names: {}", fmt::join(optim::optimizer_names(), " | ")).c_str())
      ("weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay), "not applied to biases and LayerNorm weights")
      ("adam-beta1", po::value(&o.adam_beta1)->default_value(o.adam_beta1, "0.9"), "AdamW beta1")
      ("adam-beta2", po::value(&o.adam_beta2)->default_value(o.adam_beta2), "AdamW beta2")
      ("adam-epsilon", po::value(&o.adam_epsilon)->default_value(o.adam_epsilon, "1e-8"), "AdamW epsilon")
      ("sgd-momentum", po::value(&o.sgd_momentum)->default_value(o.sgd_momentum), "SGD momentum (0: none)")
      ("sgd-dampening", po::value(&o.sgd_dampening)->default_value(o.sgd_dampening), "SGD dampening of the momentum")
      ("sgd-nesterov", po::bool_switch(&o.sgd_nesterov), "SGD with Nesterov momentum (needs --sgd-momentum > 0)")
      ("adafactor-beta1", po::value(&o.adafactor_beta1)->default_value(o.adafactor_beta1),
       "Adafactor first-moment decay (0: no first moment, Transformers' beta1=None)")
      ("adafactor-relative-step", po::bool_switch(&o.adafactor_relative_step),
       "Adafactor's own step size min(1e-2, 1/sqrt(step)) instead of --lr and its schedule")
      ("adafactor-scale-parameter", po::bool_switch(&o.adafactor_scale_parameter),
       "Adafactor: step size times max(eps2, RMS of the parameter)")
      ("adafactor-warmup-init", po::bool_switch(&o.adafactor_warmup_init),
       "Adafactor relative step min(1e-6 step, 1/sqrt(step)) (needs --adafactor-relative-step)")
      ("adafactor-clip-threshold", po::value(&o.adafactor_clip_threshold)->default_value(o.adafactor_clip_threshold),
       "Adafactor: largest RMS of an update")
      ("adafactor-decay-rate", po::value(&o.adafactor_decay_rate)->default_value(o.adafactor_decay_rate, "-0.8"),
       "Adafactor: beta2 of step t is 1 - t^rate")
      ("adafactor-eps1", po::value(&o.adafactor_eps1)->default_value(o.adafactor_eps1, "1e-30"),
       "Adafactor: added to the squared gradient")
      ("adafactor-eps2", po::value(&o.adafactor_eps2)->default_value(o.adafactor_eps2, "1e-3"),
       "Adafactor: floor of the parameter scale");
  return g;
}

po::options_description loss_group(int64_t& chunk_tokens) {
  po::options_description g("Loss");
  g.add_options()
      ("loss-chunk-tokens", po::value(&chunk_tokens)->default_value(chunk_tokens),
       "causal LMs: tokens per chunk of the head and its cross-entropy, so that the [tokens x vocabulary] logits "
       "never exist whole (0: unchunked, every predicted token's logits at once); the same loss either way");
  return g;
}

po::options_description zero_group(ZeroFlags& flags) {
  po::options_description g("ZeRO");
  g.add_options()
      ("zero-stage", po::value(&flags.stage)->default_value(flags.stage), "ZeRO: 0 every rank holds everything; "
       "1 optimizer state sharded over the ranks (gradients reduce-scattered, parameters all-gathered: no more bytes "
       "than an allreduce); 2 gradients sharded too; 3 parameters sharded too (each unit - a transformer layer, the "
       "embeddings, the head - gathered around its forward and backward). The same weights as 0; checkpoints resume "
       "at any stage and rank count (estimate-memory and bench predict: the ranks are --world-size, the modelled ones)")
      ("zero-reshard-after-forward", po::value(&flags.reshard_after_forward)->default_value(flags.reshard_after_forward),
       "true | false: with --zero-stage 3, release a unit's gathered parameters after its forward and gather them "
       "again for its backward (true), or keep them until its backward (false: fewer bytes, more memory)");
  return g;
}

bool reshard_after_forward(const ZeroFlags& flags) {
  return parse_on_off(flags.reshard_after_forward, "zero-reshard-after-forward");
}

namespace {

po::options_description distributed_group(train::TrainOptions& o, Texts& t) {
  po::options_description g("Distributed");
  g.add_options()
      ("bucket-mb", po::value(&o.accelerator.bucket_mb)->default_value(o.accelerator.bucket_mb), "gradient bucket size, MiB")
      ("first-bucket-mb", po::value(&o.accelerator.first_bucket_mb)->default_value(o.accelerator.first_bucket_mb), "first gradient bucket size, MiB")
      ("overlap", po::value(&t.overlap)->default_value(t.overlap), "on | off: reduce gradients during backward")
      ("check-sync-every", po::value(&o.check_sync_every)->default_value(0), "steps between replica checksums (0: never)")
      ("threads", po::value(&o.accelerator.threads)->default_value(0), "CPU threads per rank (0: cores on the node / ranks on the node)")
      ("device", po::value(&o.accelerator.device)->default_value(o.accelerator.device), "auto | cpu | cuda (GPU local_rank % count)")
      ("collective-timeout", po::value(&o.accelerator.collective_timeout)->default_value(o.accelerator.collective_timeout),
       "seconds a collective may wait for the other ranks before the job ends naming the missing ones (0: off)")
      ("local-sgd-steps", po::value(&o.accelerator.local_sgd_steps)->default_value(0), "Local SGD: no gradient allreduce; "
       "the parameters are averaged over the ranks every K optimizer steps (and before evaluation and checkpoints); 0: off")
      ("grad-reduce-dtype",
       po::value(&t.grad_reduce_dtype)->default_value(std::string(train::to_string(o.accelerator.grad_reduce_dtype))),
       "fp32 | bf16: the dtype gradients travel in while the ranks average them (bf16: half the bytes, rounded to "
       "8 significant bits; the averages, weights and optimizer state stay fp32)");
  return g;
}

po::options_description checkpoint_group(train::TrainOptions& o, Texts& t) {
  po::options_description g("Checkpoints");
  g.add_options()
      ("output", po::value(&t.output)->required(), "run folder: checkpoint-STEP/, final/, metrics.jsonl")
      ("save-steps", po::value(&o.save_steps)->default_value(0), "steps between checkpoints (0: every epoch's end)")
      ("save-total-limit", po::value(&o.save_total_limit)->default_value(0), "newest checkpoints kept (0: all)")
      ("eval-steps", po::value(&o.eval_steps)->default_value(0), "steps between evaluations (0: every epoch's end)")
      ("save-dtype", po::value(&o.save_dtype)->default_value(o.save_dtype), "fp32 | bf16 | fp16: dtype of the final "
       "model's weights (OUTPUT/final); checkpoints keep fp32 so that resume is exact")
      ("resume", po::value(&o.resume), "auto (newest intact checkpoint of the run in --output) or a checkpoint folder")
      ("overwrite-output-dir", po::bool_switch(&o.overwrite_output_dir), "start a new run in an --output that holds "
       "another run's files (they are kept, renamed NAME.run-ID; its checkpoints are never removed)")
      ("max-time", po::value(&o.max_time), "wall-clock limit HH:MM:SS or seconds: before it (or a Slurm job's end) "
       "runs out the run saves a checkpoint and exits with code 75 (as on SIGTERM, SIGINT or SIGUSR1; README "
       "\"Stopping a run\")");
  return g;
}

po::options_description logging_group(train::TrainOptions& o, std::string& trace, std::string& timeline) {
  po::options_description g("Logging");
  g.add_options()
      ("logging-steps", po::value(&o.logging_steps)->default_value(o.logging_steps), "steps between metrics.jsonl lines")
      ("log-all-ranks", po::bool_switch(&o.accelerator.log_all_ranks), "every rank logs, lines prefixed with the rank")
      ("peak-tflops", po::value(&o.peak_tflops)->default_value(0), "a rank's peak TFLOP/s for MFU in metrics.jsonl and "
       "the progress line (0: measured at start with matrix products in the training dtype)")
      ("no-progress", "plain progress lines instead of a progress bar")
      ("report-to", po::value(&o.report_to)->default_value(o.report_to), "tensorboard | none: tensorboard writes "
       "OUTPUT/runs/events.out.tfevents.* (rank 0; the values of metrics.jsonl)")
      ("trace-examples", po::value(&trace), "testing: each rank appends `epoch step example_index` lines to "
       "DIR/examples-rank<R>.txt")
      ("timeline", po::value(&timeline), "write a Chrome trace (open in https://ui.perfetto.dev or chrome://tracing) "
       "of every rank's steps to FILE.json at the end: data wait, forward, backward, bucket allreduces, optimizer, "
       "evaluation, checkpoints; one process per rank, clocks aligned to rank 0's")
      ("inject-overflow", po::value(&o.inject_overflow), "testing: RANK:STEP, that rank's gradients become inf in "
       "optimizer step STEP (with loss scaling the step is skipped on every rank)");
  return g;
}

// The command that continues a stopped run: these arguments with --resume auto instead of any --resume.
std::string resume_command(const Args& args) {
  std::string line = "hpctrain train";
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--resume") {
      ++i;
      continue;
    }
    if (args[i].rfind("--resume=", 0) == 0) continue;
    const bool quote = args[i].empty() || args[i].find_first_of(" \t'\"$") != std::string::npos;
    line += quote ? " '" + args[i] + "'" : " " + args[i];
  }
  return line + " --resume auto";
}

}  // namespace

bool parse_on_off(const std::string& text, const char* flag) {
  if (text == "on" || text == "true" || text == "1") return true;
  if (text == "off" || text == "false" || text == "0") return false;
  fail("--{} '{}': expected on or off (true or false)", flag, text);
}

int train_command(const Args& args, dist::Comm& comm) {
  train::TrainOptions options;
  Texts texts;
  std::string trace, timeline;
  QuantizeBaseFlags quantize;
  ZeroFlags zero;
  po::options_description all;
  all.add(data_group(options, texts)).add(model_group(options, texts)).add(quantize_base_group(quantize));
  all.add(optimization_group(options, texts));
  all.add(optimizer_group(options.optimizer)).add(loss_group(options.loss_chunk_tokens));
  all.add(distributed_group(options, texts)).add(zero_group(zero)).add(checkpoint_group(options, texts)).add(logging_group(options, trace, timeline));
  po::variables_map values;
  if (!parse_options(args, kUsage, all, values)) return 0;
  options.data = texts.data, options.model_dir = texts.model, options.tokenizer = texts.tokenizer;
  options.output = texts.output, options.trace_examples = trace, options.timeline = timeline;
  options.shuffle = data::parse_shuffle_mode(texts.shuffle);
  options.accelerator.overlap = parse_on_off(texts.overlap, "overlap");
  options.accelerator.zero_stage = zero.stage;
  options.accelerator.zero_reshard_after_forward = reshard_after_forward(zero);
  options.accelerator.mixed_precision = train::parse_mixed_precision(texts.mixed_precision);
  options.accelerator.loss_scaling = train::parse_loss_scaling(texts.loss_scale);
  options.accelerator.grad_reduce_dtype = train::parse_grad_reduce_dtype(texts.grad_reduce_dtype);
  options.progress = values.count("no-progress") == 0;
  if (const auto quant = quantize_base_options(quantize)) {  // validated again, with --lora-r, by validate_train_options
    options.quantize_base = models::to_string(quant->type);
    options.double_quant = quant->double_quant, options.quant_blocksize = quant->blocksize;
    options.quantize_embeddings = quant->embeddings;
  }
  options.eval_split_required = !values["eval-split"].defaulted();
  core::install_stop_handlers();  // Note [Stop agreement]
  const train::TrainResult result = train::run_training(comm, options);
  if (result.stopped_by.empty()) return 0;
  log::info("stopped early by {} after step {}: checkpoint {} is complete; resume with the same launcher and: {} "
            "(exit code {})", result.stopped_by, result.global_step, result.checkpoint_dir.string(), resume_command(args),
            core::kStoppedEarlyExitCode);
  return core::kStoppedEarlyExitCode;
}

}  // namespace hpctrain::cli
