// Hugging Face model folders: config.json + model.safetensors (or shards), read and written through
// io/ so that `transformers` loads what hpctrain saves and the other way round.
#pragma once

#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/weights.hpp"

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace hpctrain::models {

// A loaded model of kind M (SequenceClassifier, CausalLM or any Model) and what loading did.
template <typename M>
struct Loaded {
  std::shared_ptr<M> model;
  LoadReport report;  // newly initialized head, ignored pretraining tensors, dtype conversions
};
using Pretrained = Loaded<SequenceClassifier>;

// from_config(io::HfConfig::load(dir)) (a classifier: Error naming the model_type for another kind), then
// load_state_dict() of the folder's safetensors weights (F16/BF16 upcast to the model's float32). Strict (weights.hpp,
// Note [Base checkpoints]): Error naming the folder and every missing, unexpected or wrong-shaped tensor. A head absent
// from a base checkpoint is initialized from LibTorch's default generator (torch::manual_seed first for
// reproducibility).
[[nodiscard]] Pretrained from_pretrained(const std::filesystem::path& dir);

// As from_pretrained, for a causal LM (gpt2, llama, qwen2): the weights in any stored dtype are converted to
// the model's float32; a tied head's lm_head.weight, if stored, is ignored (Note [Tied head]).
[[nodiscard]] Loaded<CausalLM> causal_lm_from_pretrained(const std::filesystem::path& dir);

// As from_pretrained, for any registered model kind (registry.hpp).
[[nodiscard]] Loaded<Model> load_pretrained(const std::filesystem::path& dir);

// The folder's tensors as CPU at::Tensors in their stored dtypes (copied out of the mapping).
[[nodiscard]] StateDict read_weights(const std::filesystem::path& dir);

// The folder's tensors as read-only views into its memory-mapped files, valid while `files` lives: nothing is
// read until a view is (a tensor whose bytes are not aligned for its dtype is copied). For loading one unit at a
// time (Note [Deferred materialization]).
struct MappedWeights {
  std::shared_ptr<const io::SafetensorsCheckpoint> files;
  StateDict tensors;
};
[[nodiscard]] MappedWeights map_weights(const std::filesystem::path& dir);

// The folder's weights as the deferred values of `model`, built with deferred parameters (Note [Deferred
// materialization]): mapped, not read now; each value is copied when its parameter is materialized, and its file
// pages are dropped once read (Note [Quantized at load]). Buffers and parameters that hold memory already are copied
// now. `check` sees every value first (e.g. a finite check naming the tensor); drop_resized: a classification head of
// another size is left out (drop_resized_head). Errors as load_state_dict's.
LoadReport defer_pretrained_weights(Model& model, const std::filesystem::path& dir, bool drop_resized,
                                    const std::function<void(const at::Tensor&, const std::string&)>& check = {});

// Writes `dir` as transformers' save_pretrained: config.json (model.config() with "architectures" and
// "torch_dtype" set, written by io::HfConfig::save: labels, unknown keys kept), the weights
// in the parameters' dtype with HF names and {"format": "pt"} metadata (model.safetensors, or shards
// past 5 GB), and copies of `tokenizer_files` (vocab.txt, tokenizer_config.json, ...).
// Atomic: everything is written to a temporary sibling folder that then replaces `dir`; an existing
// `dir` must be a model folder (has config.json) or empty, and is replaced as a whole. Rank 0 only.
// save_dtype: floating-point tensors are stored in this dtype (and config.json's torch_dtype says so);
// nullopt: as they are.
void save_pretrained(const Model& model, const std::filesystem::path& dir,
                     const std::vector<std::filesystem::path>& tokenizer_files = {},
                     std::optional<at::ScalarType> save_dtype = std::nullopt);

// save_pretrained's files written into `dir`, an existing empty folder, without its atomic replacement:
// for callers that build a larger folder atomically themselves (checkpoints, Accelerator::save_state).
void write_pretrained_files(const Model& model, const std::filesystem::path& dir,
                            const std::vector<std::filesystem::path>& tokenizer_files = {},
                            std::optional<at::ScalarType> save_dtype = std::nullopt);

// Streamed writes (Note [Streamed writes] in src/train/streamed_save.cpp): the weights write_pretrained_files writes (names, dtypes after
// save_dtype, shapes; no data), in state_dict(model)'s order; and write_pretrained_files taking the bytes of
// weight i from data(i) as it writes it, in io::save_sharded_order(pretrained_layout(...)).
[[nodiscard]] std::vector<io::TensorView> pretrained_layout(const Model& model, std::optional<at::ScalarType> save_dtype);
void write_pretrained_files(const Model& model, const std::filesystem::path& dir,
                            const std::vector<std::filesystem::path>& tokenizer_files,
                            std::optional<at::ScalarType> save_dtype, const io::TensorData& data);
void save_pretrained(const Model& model, const std::filesystem::path& dir,
                     const std::vector<std::filesystem::path>& tokenizer_files,
                     std::optional<at::ScalarType> save_dtype, const io::TensorData& data);

}  // namespace hpctrain::models
