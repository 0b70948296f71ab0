// decoder_activations (activation_arithmetic.hpp): the activation bytes of a causal LM's training step.
#include <algorithm>

#include "activation_arithmetic.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::train::detail {

// Note [Decoder activation arithmetic]
// What autograd keeps for backward in the decoders as models/ builds them (gpt2.cpp, llama.cpp, attention.cpp,
// causal_lm.cpp), for T = batch x sequence tokens, width D, feed-forward width F, and a = 4 (fp32) or 2 (bf16):
// - A GPT-2 block keeps what a DistilBERT layer keeps (Note [Activation arithmetic]): LayerNorm inputs (the fp32
//   residual stream), their outputs (bf16 copies under autocast, one per matrix product), q, k, v, the context,
//   the merged heads, the FFN's pre-activation and activation (gelu_new). Dropout keeps only its seed.
// - A Llama/Qwen2 layer, with query width Dq = heads x head_dim and key/value width Dk = kv_heads x head_dim:
//   the RMSNorms keep their fp32 input (the residual stream) and normalized value (2 x 2 T x D fp32) and the
//   rsqrt (2 T); their outputs are kept by the projections: one fp32 tensor each, or under autocast one bf16
//   copy per projection (q, k, v: 3; gate, up: 2). Rotary embeddings keep q and k and their rotate_half
//   (2 T x Dq + 2 T x Dk); the blocked attention keeps q, and k and v expanded to all heads (3 T x Dq), and the
//   context (T x Dq); o_proj keeps the merged heads (T x Dq). SwiGLU keeps gate (for SiLU), SiLU(gate) and up
//   (for the product), and the product (for down_proj): 4 T x F.
// - The head: the final norm's input and its output (a copy per precision as above), the token ids (int64);
//   under autocast, bf16 copies of the layers' matrix weights live until their backward.
// - The loss (Note [Chunked loss] in models/loss.hpp), over the n = B (L - 1) predicted tokens of packed rows
//   (the last position of each row predicts nothing): the final hidden states and the selected ones ((B L + n) x D
//   fp32), and
//   * chunked (--loss-chunk-tokens c > 0), during its forward: a chunk's logits (c x V in the products' dtype;
//     under autocast their fp32 copy too), the float32 gradient of the head's weight (V x D; under autocast also
//     the weight's bf16 copy), and the hidden states' gradient (n x D). No [n, V] tensor, so at large V the
//     head's weight and its gradient dominate the term;
//   * unchunked (0): the kept tokens' logits [n, V] in the forward's dtype, under autocast their fp32 copy and the
//     head weight's bf16 copy (kept by the product for backward), and log_softmax's output (kept for backward),
//     all alive at once in forward; in backward the kept log-probabilities, nll_loss's gradient and log_softmax's
//     gradient (3 x 4 bytes x n V). At small D and large V these dominate the step.
//   Either way the term is counted beside (not on top of) the layers' backward temporaries, which come after
//   the loss's tensors are freed.
// - The end of backward: the input embedding's dense gradient (V x D fp32) before it reaches the reducer's
//   bucket; with a tied head also the head's gradient, which autograd holds from the start of backward until the
//   embedding's arrives, and their sum (3 x V x D fp32). The layers' tensors are gone by then, so this is a peak
//   of its own (at small width and with checkpointing, the step's).
// Gradient checkpointing keeps each layer's input (fp32: the residual stream) and recomputes one layer at a time
// in backward, after the loss's tensors are gone.
namespace {

struct DecoderShape {
  bool llama = false;  // RMSNorm, rotary, SwiGLU (llama, qwen2); else GPT-2's LayerNorm block
  bool tied = false;   // the head is the input embedding (Note [Tied head])
  int64_t layers = 0, width = 0, ffn_width = 0, query_width = 0, kv_width = 0, vocab = 0, max_positions = 0;
};

DecoderShape decoder_shape(const io::HfConfig& config) {
  if (config.model_type() == "gpt2") {
    const io::Gpt2Config& c = config.gpt2();
    return {false, c.tie_word_embeddings, c.n_layer, c.n_embd, c.inner_size(), c.n_embd, c.n_embd, c.vocab_size,
            c.n_positions};
  }
  const io::LlamaConfig& c = config.llama_family();
  return {true,
          c.tie_word_embeddings,
          c.num_hidden_layers,
          c.hidden_size,
          c.intermediate_size,
          c.num_attention_heads * c.head_size(),
          c.kv_heads() * c.head_size(),
          c.vocab_size,
          c.max_position_embeddings};
}

int64_t llama_layer_bytes(const DecoderShape& s, int64_t tokens, int64_t a) {
  const int64_t norm_inputs_and_normalized = 2 * 2 * tokens * s.width * 4 + 2 * tokens * 4;
  const int64_t norm_outputs = tokens * s.width * (a == 4 ? 2 * 4 : 5 * a);  // fp32 shared, or one copy per product
  const int64_t attention = tokens * (7 * s.query_width + 2 * s.kv_width) * a + tokens * a;  // + the padding bias
  const int64_t swiglu = 4 * tokens * s.ffn_width * a;
  return norm_inputs_and_normalized + norm_outputs + attention + swiglu;
}

// Parameters of the layers' matrix products (autocast's bf16 weight copies).
int64_t layer_matrix_weights(const DecoderShape& s) {
  const int64_t attention = s.width * (2 * s.query_width + 2 * s.kv_width);
  const int64_t mlp = (s.llama ? 3 : 2) * s.width * s.ffn_width;
  return s.layers * (attention + mlp);
}

// Under LoRA the base is frozen (Note [LoRA memory arithmetic]): autocast caches bf16 copies of weights that require
// grad only (a frozen weight is cast for each product and let go), and no base weight gets a gradient.
bool frozen_base(const MemoryEstimateOptions& o) { return o.lora_r > 0; }

int64_t head_bytes(const DecoderShape& s, const MemoryEstimateOptions& o, int64_t a) {
  const int64_t tokens = o.batch_size * o.sequence_length;
  const int64_t final_norm = tokens * s.width * (s.llama ? 2 * 4 : 4) + tokens * (s.llama ? 4 : 8);
  const int64_t weight_copies = a == 4 || frozen_base(o) ? 0 : 2 * layer_matrix_weights(s);
  return tokens * 8 + final_norm + weight_copies;
}

// The loss's peak (Note [Decoder activation arithmetic]), chunked or not.
int64_t loss_bytes(const DecoderShape& s, const MemoryEstimateOptions& o, int64_t a) {
  const int64_t kept = o.batch_size * (o.sequence_length - 1), vocab = s.vocab, width = s.width;
  const int64_t selected = (o.batch_size * o.sequence_length + kept) * width * 4;  // the hidden states, and the kept
  // The head's weight in bf16 under autocast: a cast copy, unless a 4-bit head is dequantized into bf16 directly (its
  // bytes are the estimate's dequantized weight, Note [Quantized embeddings]).
  const bool quantized_head = o.quantize && o.quantize->embeddings;
  const int64_t head_copy = a == 4 || quantized_head ? 0 : vocab * width * 2;
  if (o.loss_chunk_tokens == 0) {
    const int64_t logits = kept * vocab;
    const int64_t autocast_copies = a == 4 ? 0 : logits * 4 + head_copy;
    const int64_t forward = logits * a + autocast_copies + logits * 4;  // logits, (copies), log-probabilities
    const int64_t backward = 3 * logits * 4;                             // log-probabilities and two gradients
    return selected + std::max(forward, backward);
  }
  const int64_t chunk = std::min(o.loss_chunk_tokens, std::max<int64_t>(kept, 1));
  const int64_t chunk_tensors = chunk * vocab * a + (a == 4 ? 0 : chunk * vocab * 4 + chunk * width * 2);
  const int64_t weight_gradient = (frozen_base(o) ? 0 : vocab * width * 4) + head_copy;  // (+ the bf16 weight)
  return selected + chunk_tensors + weight_gradient + kept * width * a;
}

}  // namespace

ActivationEstimate decoder_activations(const io::HfConfig& config, const MemoryEstimateOptions& o) {
  const DecoderShape s = decoder_shape(config);
  HPCTRAIN_CHECK(o.sequence_length <= s.max_positions, "--sequence-length {} exceeds the model's {} {}",
                 o.sequence_length, s.llama ? "max_position_embeddings" : "n_positions", s.max_positions);
  const int64_t a = activation_bytes(o.precision);
  const int64_t tokens = o.batch_size * o.sequence_length;
  ActivationEstimate e;
  e.layers = s.layers;
  e.per_layer = s.llama ? llama_layer_bytes(s, tokens, a) : layer_norm_block_bytes(tokens, s.width, s.ffn_width, a);
  const int64_t layer_input = tokens * s.width * 4;  // the fp32 residual stream, also under autocast
  e.kept = s.layers * (o.gradient_checkpointing ? layer_input : e.per_layer);
  e.embeddings_and_head = head_bytes(s, o, a);
  e.logits = loss_bytes(s, o, a);
  // The FFN's gradients (SwiGLU: the product's and both factors') and the layer's output and input gradients.
  const int64_t ffn_gradients = (s.llama ? 3 : 2) * tokens * s.ffn_width * a;
  e.backward_transient = ffn_gradients + 2 * tokens * s.width * 4 + (o.gradient_checkpointing ? e.per_layer : 0);
  e.embedding_gradients = frozen_base(o) ? 0 : (s.tied ? 3 : 1) * s.vocab * s.width * 4;
  e.total = std::max(e.kept + e.embeddings_and_head + std::max(e.logits, e.backward_transient), e.embedding_gradients);
  return e;
}

}  // namespace hpctrain::train::detail
