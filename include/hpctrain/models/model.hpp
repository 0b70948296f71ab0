// The interface every hpctrain model implements (Model) and its first kind, the sequence (or image)
// classifier (the causal language models are in causal_lm.hpp). Parameter names are Hugging Face's
// state-dict keys, so a checkpoint moves between hpctrain and `transformers` as is.
// Not here: building a model from config.json (registry.hpp), loading/saving weights (weights.hpp,
// pretrained.hpp). Models never see MPI.
#pragma once

#include "hpctrain/io/hf_config.hpp"

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::models {

// One batch. Undefined tensors mean "absent".
struct ModelInputs {
  at::Tensor input_ids;       // int64 [B, L] (text models)
  at::Tensor attention_mask;  // [B, L], 1 = token, 0 = padding (any dtype); absent = all tokens
  at::Tensor token_type_ids;  // int64 [B, L] (BERT); absent = zeros
  // int64 [B, L], causal LMs: each token's position; 0 starts a document of a row packed from several (Note
  // [Document boundaries] in src/data/examples.cpp), which attends to nothing before it. Absent = 0 ... L - 1.
  at::Tensor position_ids;
  at::Tensor pixel_values;    // floating [B, C, H, W] (vision models)
  // Absent = no loss. int64 [B] for single-label classification, floating [B, num_labels] for
  // multi-label, floating [B] or [B, num_labels] for regression (see classification_loss); int64 [B, L] token
  // ids for a causal LM, -100 = not predicted (see causal_lm_loss_sum).
  at::Tensor labels;
};

struct ModelOutput {
  at::Tensor logits;  // [B, num_labels] (classifiers) or [B, L, vocab_size] (causal LMs), in the activations' dtype
  at::Tensor loss;    // scalar (mean over the batch, or over the predicted tokens); undefined when inputs.labels is
};

// The loss transformers' *ForSequenceClassification computes for `logits` [B, num_labels] and
// `labels`. problem_type unset decides per call as transformers does: num_labels == 1 -> regression
// (MSE), integer labels -> single-label (cross-entropy), else multi-label (BCE with logits).
[[nodiscard]] at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& labels,
                                             io::ProblemType problem_type);

// Note [Layer context]
// What a transformer layer reads besides the hidden states is one LayerContext, built once per forward from the
// batch (LayerContext::of) and handed unchanged to every layer, to the layer runner (checkpointing, profiling,
// parameter gathers) and to the attention. A new per-token input of the layers (positions, document boundaries
// of packed rows) is a new field here: the models read it where they need it, and gradient checkpointing saves
// and restores every field through tensors()/from_tensors(), so no runner or wrapper changes with it.
struct LayerContext {
  at::Tensor key_mask;   // [B, L], 1 = attend, 0 = padding, any dtype; undefined = no padding
  at::Tensor positions;  // int64 [B, L]: ModelInputs::position_ids (RoPE reads them); undefined = 0 ... L - 1
  // int64 [B, L]: the document of each token of a row packed from several, numbered from 1 (a new one where
  // positions is 0; Note [Packed attention] in src/models/attention.cpp); undefined = one sequence per row.
  at::Tensor documents;

  // The context of a batch: its attention_mask as the key mask, its position_ids and the documents they mark.
  [[nodiscard]] static LayerContext of(const ModelInputs& inputs) {
    LayerContext context;
    context.key_mask = inputs.attention_mask;
    context.positions = inputs.position_ids;
    if (inputs.position_ids.defined()) context.documents = inputs.position_ids.eq(0).cumsum(1);
    return context;
  }
  // Every field, in a fixed order (undefined ones included), and the context back from such a list: what
  // gradient checkpointing keeps for the recomputation (Note [Layer checkpointing]).
  [[nodiscard]] std::vector<at::Tensor> tensors() const { return {key_mask, positions, documents}; }
  [[nodiscard]] static LayerContext from_tensors(const std::vector<at::Tensor>& tensors) {
    LayerContext context;
    context.key_mask = tensors.at(0);
    context.positions = tensors.at(1);
    context.documents = tensors.at(2);
    return context;
  }
};

// One transformer block: a pure function of (hidden, context) given its parameters (and, in training,
// the dropout RNG), so a wrapper can recompute it for gradient checkpointing. hidden: [B, L, D].
class TransformerLayer : public torch::nn::Module {
 public:
  using torch::nn::Module::Module;
  virtual at::Tensor forward(const at::Tensor& hidden, const LayerContext& context) = 0;
};

// Runs one layer; the plain runner calls layer.forward(hidden, context).
using LayerRunner =
    std::function<at::Tensor(TransformerLayer& layer, const at::Tensor& hidden, const LayerContext& context)>;

// Note [Layer runner chain]
// A model runs each transformer layer through a chain of links ending in layer.forward: each link does its work
// around the rest of the chain (`next`), which it calls once (or, gradient checkpointing, again in backward). A
// link has a fixed place, so wrappers compose whatever order they are installed in: ZeRO-3's parameter gather
// (src/train/parallel/fully_sharded.cpp) is outside gradient checkpointing (Note [Layer checkpointing]), whose
// recomputation in backward then finds the parameters gathered, and a custom runner (set_layer_runner, e.g. a
// profiler) is innermost. `next` stays valid while the model's links are not changed.
using LayerLink = std::function<at::Tensor(TransformerLayer& layer, const at::Tensor& hidden,
                                           const LayerContext& context, const LayerRunner& next)>;
enum class LayerLinkPlace { parameter_gather = 0, checkpointing = 1, custom = 2 };  // outermost first

// Note [Unit hooks]
// Besides its transformer layers, a model runs two units through a hook: the embeddings (token ids -> the first
// layer's input) and the head (the last hidden states -> logits, or a loss computed through the head). A hook
// gets the unit's input and a body that computes the unit from it; it calls the body once with the input (or a
// tensor of the same values standing in for it) and returns its output, doing its own work around it: ZeRO-3
// gathers the unit's parameters (src/train/parallel/fully_sharded.cpp). unit_modules() names the modules whose
// parameters each unit reads (a tied head reads the input embedding); every other parameter outside the layers
// (final norms, poolers) is read outside the hooks.
enum class UnitKind { embeddings, head };
using UnitBody = std::function<at::Tensor(const at::Tensor& input)>;
using UnitRunner = std::function<at::Tensor(UnitKind kind, const at::Tensor& input, const UnitBody& body)>;

// What every model says about itself for loading and saving (Note [Base checkpoints]).
struct ModelSpec {
  std::string model_type;         // config.json "model_type": "distilbert", "bert", "hpctrain-cnn", ...
  std::string architecture;       // config.json "architectures"[0]: "DistilBertForSequenceClassification"
  std::string base_model_prefix;  // "distilbert", "bert"; "" when the model has no separate base
  // Modules that a base (pretraining) checkpoint may lack; they keep their from_config initialization
  // and are reported as newly initialized. Each is all present or all absent in a checkpoint.
  std::vector<std::string> head_modules;
  // Checkpoint names the model does not use but that pretraining checkpoints carry (MLM/NSP heads,
  // legacy buffers): a name starting with one of these prefixes, or ending in one of
  // `ignorable_suffixes`, is reported as ignored instead of unexpected.
  std::vector<std::string> ignorable_prefixes;
  std::vector<std::string> ignorable_suffixes;
};

// The base of every model (Note [Objectives] in train/objective.hpp): forward(inputs) -> logits (+ loss),
// parameter names as Hugging Face's state-dict keys, the config it was built from. A model kind (the
// sequence classifiers below; the causal LMs of causal_lm.hpp) derives from it; loading, saving and gradient
// checkpointing (weights.hpp, pretrained.hpp, checkpointing.hpp) take a Model. Construct with from_config().
class Model : public torch::nn::Module {
 public:
  Model(const std::string& name, io::HfConfig config) : torch::nn::Module(name), config_(std::move(config)) {}

  virtual ModelOutput forward(const ModelInputs& inputs) = 0;
  [[nodiscard]] virtual const ModelSpec& spec() const = 0;

  // Re-initializes every parameter as transformers' _init_weights (or PyTorch's defaults for the
  // vision models), drawing from LibTorch's default CPU generator (seed it with torch::manual_seed).
  virtual void init_weights() = 0;

  // The transformer blocks in order (empty for vision models), for wrappers such as checkpointing.
  [[nodiscard]] virtual std::vector<TransformerLayer*> transformer_layers() { return {}; }
  // Note [Layer runner chain]: installs `link` at `place` (an empty link removes it).
  void set_layer_link(LayerLinkPlace place, LayerLink link);
  // The innermost link: `runner` runs the layer itself (the plain runner when empty).
  void set_layer_runner(LayerRunner runner);

  // The token embedding (transformers' get_input_embeddings), or null for a model without one (vision).
  [[nodiscard]] virtual torch::nn::EmbeddingImpl* input_embeddings() { return nullptr; }
  // Note [Unit hooks]: the modules whose parameters the `kind` unit reads (empty: the model runs no such unit).
  [[nodiscard]] virtual std::vector<torch::nn::Module*> unit_modules(UnitKind kind) { return {}; }
  void set_unit_runner(UnitRunner runner) { unit_runner_ = std::move(runner); }

  // The config the model was built from (unknown keys kept), which save_pretrained writes back.
  [[nodiscard]] const io::HfConfig& config() const { return config_; }
  // Note [Deferred materialization] (models/materialize.hpp): the seed its deferred parameters are initialized
  // from; nullopt once every parameter holds memory.
  [[nodiscard]] std::optional<uint64_t> deferred_seed() const { return deferred_seed_; }
  void set_deferred_seed(std::optional<uint64_t> seed) {
    deferred_seed_ = seed;
    if (!seed) deferred_values_.reset();
  }
  // Loaded values deferred parameters take when materialized (key -> tensor; `source` keeps them valid, e.g. the
  // mapped files); the others are initialized.
  struct DeferredValues {
    std::map<std::string, at::Tensor> values;
    std::shared_ptr<const void> source;
    // Called on a value once it is copied into its parameter (e.g. to drop a mapped file's pages); may be empty.
    std::function<void(const at::Tensor&)> release;
  };
  [[nodiscard]] const std::shared_ptr<const DeferredValues>& deferred_values() const { return deferred_values_; }
  void set_deferred_values(std::shared_ptr<const DeferredValues> values) { deferred_values_ = std::move(values); }

 protected:
  at::Tensor run_layer(TransformerLayer& layer, const at::Tensor& hidden, const LayerContext& context) {
    return chain_.empty() ? layer.forward(hidden, context) : chain_.front()(layer, hidden, context);
  }
  at::Tensor run_unit(UnitKind kind, const at::Tensor& input, const UnitBody& body) {
    return unit_runner_ ? unit_runner_(kind, input, body) : body(input);
  }

 private:
  void build_chain();

  io::HfConfig config_;
  std::array<LayerLink, 3> links_;  // by LayerLinkPlace
  std::vector<LayerRunner> chain_;  // chain_[i] runs the i-th installed link with next = chain_[i + 1]; empty: none
  UnitRunner unit_runner_;
  std::optional<uint64_t> deferred_seed_;
  std::shared_ptr<const DeferredValues> deferred_values_;
};

// A classifier: forward(inputs) -> logits [B, num_labels] (+ loss). DistilBERT, BERT and the vision models.
class SequenceClassifier : public Model {
 public:
  using Model::Model;
  [[nodiscard]] int64_t num_labels() const { return config().common.num_labels(); }
};

}  // namespace hpctrain::models
