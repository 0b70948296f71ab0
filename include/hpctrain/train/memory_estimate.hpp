// The memory arithmetic of one training step, per rank, before training (`hpctrain estimate-memory`, cf.
// `accelerate estimate-memory`): parameters, gradients, reducer buckets, optimizer state, activations
// (Note [Activation arithmetic]) and their total, in bytes. All sizes are per rank: batch_size is the
// per-rank micro-batch, not the global batch.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/dist/buckets.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/nf4.hpp"
#include "hpctrain/models/loss.hpp"
#include "hpctrain/optim/optimizer_options.hpp"

namespace hpctrain::dist {
class Comm;
}  // namespace hpctrain::dist

namespace hpctrain::train {

struct MemoryEstimateOptions {
  int64_t batch_size = 8;          // examples per rank per micro-batch
  int64_t sequence_length = 128;   // tokens per example (padded length)
  std::string precision = "fp32";  // fp32 | bf16: the activations' dtype (parameters and gradients stay fp32)
  bool gradient_checkpointing = false;
  bool gradients_are_bucket_views = true;  // CPU: the reducer's buckets hold the gradients (no extra copy)
  optim::OptimizerOptions optimizer;
  // ZeRO (Note [ZeRO memory arithmetic] in src/train/zero_memory_estimate.cpp): 0 = every rank holds everything;
  // 1 = optimizer state sharded over world_size ranks; 2 = the reduced gradients too; 3 = the parameters too.
  int zero_stage = 0;
  bool zero_reshard_after_forward = true;  // stage 3: units released after forward (train's --zero-reshard-after-forward)
  int world_size = 1;
  int64_t first_bucket_bytes = dist::kDefaultFirstBucketBytes;  // the gradient buckets' caps (--first-bucket-mb,
  int64_t bucket_bytes = dist::kDefaultBucketBytes;             // --bucket-mb), bytes
  // LoRA (Note [LoRA memory arithmetic] in src/train/lora_memory_estimate.cpp): adapters of rank lora_r > 0 on
  // lora_target_modules (as train's --lora-target-modules; "" = PEFT's default); 0 = full fine-tuning.
  int64_t lora_r = 0;
  std::string lora_target_modules;
  // QLoRA (--quantize-base, needs lora_r > 0): the frozen linear layers held in 4-bit form (Note [Quantized base]).
  std::optional<models::Quant4Options> quantize;
  // Causal LMs: tokens per chunk of the head and its loss (--loss-chunk-tokens, Note [Chunked loss] in
  // models/loss.hpp); 0 = unchunked.
  int64_t loss_chunk_tokens = models::kDefaultLossChunkTokens;
};

// The activations of one transformer model, bytes.
struct ActivationEstimate {
  int64_t per_layer = 0;      // what autograd keeps for backward per transformer layer
  int64_t layers = 0;         // transformer layers
  int64_t kept = 0;           // kept across the whole forward (all layers, or layer inputs when checkpointing)
  int64_t embeddings_and_head = 0;  // token ids, final norm, head inputs (decoders: bf16 weight copies too)
  int64_t logits = 0;              // causal LMs: the head's logits and the loss's tensors at their peak; 0 else
  int64_t backward_transient = 0;  // gradient temporaries of the largest layer op in backward (plus the
                                   // recomputed layer when checkpointing)
  // Causal LMs: the end of backward, when the layers' tensors are gone: the input embedding's dense gradient (and,
  // tied, the head's gradient that waits for it, and their sum); 0 else.
  int64_t embedding_gradients = 0;
  // The step's activation peak: max(kept + embeddings_and_head + max(logits, backward_transient), embedding_gradients).
  int64_t total = 0;
};

struct MemoryEstimate {
  std::string model_type, optimizer, precision;
  int zero_stage = 0, world_size = 1;
  int64_t parameter_count = 0;            // with LoRA's adapters
  int64_t trainable_parameter_count = 0;  // what has gradients and optimizer state (all but LoRA's frozen base)
  int64_t lora_r = 0;
  std::string quantize_base;                 // "nf4" | "fp4" | "" (full precision)
  int64_t quantized_parameter_count = 0;     // weights held in 4-bit form (counted in parameters at their bytes)
  int64_t dequantized_weight = 0;            // bytes: the largest 4-bit weight dequantized whole for its product
  bool fused_4bit_products = false;          // the linear layers' products never hold their weight whole
                                             // (Note [Fused 4-bit product]: float32 on an AVX-512 CPU)
  // Bytes. Under ZeRO (stage > 0, world_size > 1): gradients are the full buckets (stage 1) or this rank's
  // reduced slices (stage 2); reducer_buckets the reduced slices (stage 1) or the buckets in flight during
  // backward (stage 2); optimizer_state the largest rank's share.
  int64_t parameters = 0, gradients = 0, reducer_buckets = 0, optimizer_state = 0;
  ActivationEstimate activations;
  int64_t total = 0;  // bytes: the sum of the above
};

using ParameterShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;  // name -> shape (fp32)

// Error naming the option when a size is not positive, the precision is unknown, or the model type has
// no activation arithmetic (the vision models). Encoders (distilbert, bert) and decoders (gpt2, llama, qwen2).
[[nodiscard]] MemoryEstimate estimate_memory(const io::HfConfig& config, const ParameterShapes& parameters,
                                             const MemoryEstimateOptions& options);

[[nodiscard]] nlohmann::json to_json(const MemoryEstimate& estimate);
// The table `hpctrain estimate-memory` prints: one row per part, bytes and MiB.
[[nodiscard]] std::string format_table(const MemoryEstimate& estimate);

}  // namespace hpctrain::train

namespace hpctrain::train {

// The shapes of the model from_config(config) builds (it is built, then freed).
[[nodiscard]] ParameterShapes parameter_shapes(const io::HfConfig& config);

struct MeasuredStep {
  int64_t peak_bytes = 0;      // peak resident memory of the step minus `baseline_bytes`
  int64_t baseline_bytes = 0;  // resident memory before the model was built
  int ranks = 1;               // ranks that ran the step; both figures are the largest over them
  int64_t model_bytes = 0;     // the measured model's parameters and buffers (a 4-bit base at its packed size)
};
// One real training step in this process: model, gradient reducer (single-process Comm), optimizer,
// forward/backward/step on random token ids of options.batch_size x options.sequence_length, under bf16
// autocast for precision bf16 and with the layers recomputed in backward for gradient_checkpointing, as
// `hpctrain train` runs them. Measures the peak resident set size (VmHWM, reset first) with large buffers
// mmap'ed (core::LiveTensorResidency): the live tensors' peak. Error when /proc/self cannot be read.
// Collective when `comm` has more than one rank: every rank runs the step at options.zero_stage over `comm`
// (its world size must be options.world_size, else an error naming both) and the result is the largest
// rank's (Note [Measured ZeRO step] in src/train/memory_measure.cpp).
[[nodiscard]] MeasuredStep measure_training_step(const io::HfConfig& config, const MemoryEstimateOptions& options,
                                                 int threads, dist::Comm& comm);

}  // namespace hpctrain::train
