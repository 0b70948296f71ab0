// Typed options of `hpctrain train` (src/cli/train_command.cpp maps flags and config-file keys onto them).
// validate_train_options() rejects bad values before any training work, naming the option.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include "hpctrain/data/sampler.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/train/accelerator_options.hpp"
#include "hpctrain/optim/optimizer_options.hpp"

namespace hpctrain::train {

struct TrainOptions {
  // ---- Data ----
  std::filesystem::path data;              // HDF5 dataset file (hpctrain prep)
  std::string train_split = "train";
  std::string eval_split = "validation";   // skipped when the file has no such split, unless required
  bool eval_split_required = false;        // --eval-split given explicitly: a missing split is an error
  data::ShuffleMode shuffle = data::ShuffleMode::shard;
  int64_t cache_mb = 512;                  // MiB of examples each rank keeps in memory; larger shards stream
  std::filesystem::path tokenizer;         // tokenizer folder copied into checkpoints (default: --model's)

  // ---- Model ----
  std::filesystem::path model_dir;         // a Hugging Face folder (config.json + safetensors)
  std::string model_config;                // a config.json file, or "preset:NAME" (see model_presets())
  // LoRA (Note [LoRA] in models/lora.hpp), PEFT's names: adapters of rank lora_r > 0 on a frozen --model.
  int64_t lora_r = 0;                      // 0 = no LoRA: every parameter trains
  double lora_alpha = 8;                   // scaling = alpha / r
  double lora_dropout = 0;
  std::string lora_target_modules;         // comma list or all-linear; "" = PEFT's default for the model type
  std::string lora_modules_to_save = "auto";  // comma list; auto = PEFT's for the task (classifier heads); none
  bool merge_lora = false;                 // also write OUTPUT/final-merged: the base with the adapter merged
  // QLoRA (Note [Quantized base] in models/quantized_linear.hpp): the frozen base's linear layers in 4-bit form.
  std::string quantize_base;               // "" (full precision) | nf4 | fp4; needs lora_r > 0
  bool double_quant = true;                // the absmax values 8-bit quantized too (--no-double-quant: off)
  bool quantize_embeddings = false;        // the token embedding and LM head too (Note [Quantized embeddings])
  int64_t quant_blocksize = 64;            // weights per absmax block (a power of two, 32..4096)

  // ---- Optimization ----
  int64_t epochs = 3;
  int64_t max_steps = -1;                  // > 0: optimizer steps of the run, overrides epochs
  int64_t batch_size = 8;                  // per rank, per micro-batch (examples)
  int64_t eval_batch_size = 0;             // per rank; 0 = batch_size
  double lr = 5e-5;                        // peak of the schedule (Adafactor with relative step: unused)
  optim::OptimizerOptions optimizer;              // --optim and its hyper-parameters (optimizer_options.hpp)
  double warmup_ratio = 0.0;               // share of the total steps; used when warmup_steps == 0
  int64_t warmup_steps = 0;
  std::string lr_scheduler = "linear";     // linear | cosine | constant
  double max_grad_norm = 1.0;              // <= 0: no clipping (the norm is still logged)
  bool skip_nonfinite = false;             // skip a step whose loss is NaN/inf instead of stopping
  // Causal LMs: tokens per chunk of the head and its loss (Note [Chunked loss] in models/loss.hpp); 0 = unchunked.
  int64_t loss_chunk_tokens = models::kDefaultLossChunkTokens;

  // ---- Distributed ----
  // Device, threads, gradient buckets and overlap, accumulation steps, seed, log_all_ranks and the
  // collective timeout: declared once, with their defaults, in accelerator_options.hpp.
  AcceleratorOptions accelerator;
  int64_t check_sync_every = 0;            // steps between replica checksums; 0 = never

  // ---- Checkpoints ----
  std::filesystem::path output;            // run folder: checkpoint-STEP/, final/, metrics.jsonl
  int64_t save_steps = 0;                  // steps between checkpoints; 0 = at the end of every epoch
  int64_t save_total_limit = 0;            // newest checkpoints kept; 0 = all
  std::string resume;                      // "" (fresh), "auto" (newest intact checkpoint of this run) or a folder
  bool overwrite_output_dir = false;       // start a new run in a folder holding another's (Note [One run per folder])
  int64_t eval_steps = 0;                  // steps between evaluations; 0 = at the end of every epoch
  // dtype of OUTPUT/final's weights: fp32 | bf16 | fp16 (checkpoints keep fp32: resume stays exact).
  std::string save_dtype = "fp32";
  // Wall-clock limit, "HH:MM:SS" or seconds ("" = none): the run stops early with a checkpoint before it
  // (or before SLURM_JOB_END_TIME) runs out and exits with core::kStoppedEarlyExitCode (time_limit.hpp).
  std::string max_time;

  // ---- Logging ----
  int64_t logging_steps = 10;              // steps between metrics.jsonl lines / plain progress lines
  // MFU's peak per rank in TFLOP/s (Note [Model FLOPs]); 0 = measured at start (train/peak_flops.hpp).
  double peak_tflops = 0;
  bool progress = true;                    // progress bar on a terminal
  std::string report_to = "tensorboard";   // tensorboard (OUTPUT/runs/events.out.tfevents.*) | none; as HF's report_to
  // Testing aid: every rank appends "epoch step example_index" per trained example to
  // DIR/examples-rank<R>.txt (padding duplicates and rows before a resume position excluded).
  std::filesystem::path trace_examples;
  // Chrome trace of the run (Trace Event Format; Perfetto, chrome://tracing): every rank's spans on rank 0's
  // clock, written by rank 0 at the end (train/log/timeline.hpp). Agreed: on or off on every rank; "" = none.
  std::filesystem::path timeline;
  // Testing aid of loss scaling: "RANK:STEP", the rank whose gradients become inf in optimizer step STEP
  // (1-based) before they are averaged; "" = never.
  std::string inject_overflow;
};

// How an option is compared across ranks at start-up (Note [Agreed options], run_agreement.hpp).
enum class Agreement {
  value,     // the value must be equal on every rank
  content,   // a path: compared by the identity of what it names, not by its text
  rank0,     // used by rank 0 only (the run folder, the resume choice): other ranks' values are ignored
  per_rank,  // may differ: per-rank logging, or a per-node resource (--threads)
};

// One member of TrainOptions: its flag, how ranks compare it, and its value as text.
struct OptionField {
  const char* flag;  // "--lr"
  Agreement agreement;
  std::string (*text)(const TrainOptions&);
};

// Every member of TrainOptions exactly once, in declaration order (train_options.cpp counts them at
// compile time: a new member without an entry does not build).
[[nodiscard]] const std::vector<OptionField>& train_option_fields();

// --inject-overflow RANK:STEP (TrainOptions::inject_overflow); Error naming the option otherwise.
struct InjectedOverflow {
  int rank = 0;
  int64_t step = 0;  // 1-based optimizer step
  bool operator==(const InjectedOverflow& other) const { return rank == other.rank && step == other.step; }
};
[[nodiscard]] InjectedOverflow parse_injected_overflow(const std::string& text);

// --save-dtype as a ScalarType (Error naming the option).
[[nodiscard]] c10::ScalarType parse_save_dtype(const std::string& text);

// The top-level names inside --output that the user chose for this run's outputs: the --timeline file when it
// is directly in --output (Note [Run outputs]: --overwrite-output-dir moves it aside with the others).
[[nodiscard]] std::vector<std::string> extra_run_outputs(const TrainOptions& options);

// Throws Error naming the option, the value and what is allowed (no file system access except that the data
// file and --model folder must exist, and no input may lie inside what the run writes: check_run_inputs).
void validate_train_options(const TrainOptions& options);

}  // namespace hpctrain::train
