// LoRA (low-rank adaptation) as Hugging Face PEFT defines it: the linear layers a model names can carry an
// adapter (lora_A [r, in], lora_B [out, r]) that adds dropout(x) A^T B^T * scaling to their output; the base
// is frozen and only the adapters (and the modules to save) train. Adapter folders in PEFT's format
// (adapter_config.json + adapter_model.safetensors) are read and written here, so that `peft` loads what
// hpctrain saves and the other way round.
// Not here: the training options and checkpoints (train/lora_files.hpp), other PEFT methods (DoRA, IA3,
// prompt tuning), per-module ranks (rank_pattern / alpha_pattern), LoRA on embeddings.
//
// Note [LoRA]
// The invariant, across models/, train/ and cli/:
//  - Which parameters train: after apply_lora every parameter has requires_grad = false except the
//    adapters' (`<target>.lora_A.weight`, `<target>.lora_B.weight`) and those of the modules to save (a
//    module whose name ends with an entry of modules_to_save, PEFT's rule: "classifier" also matches
//    DistilBERT's "pre_classifier", as in peft). Everything downstream keys on requires_grad alone: the
//    Accelerator's gradient reducer takes only those parameters (no bucket, no allreduce for the base), the
//    trainer builds the optimizer from them (no state for the base), and a checkpoint or an adapter folder
//    holds exactly them (adapter_state_dict).
//  - Naming: the adapter is registered as the submodules `lora_A` and `lora_B` of the target layer, so a
//    parameter is named `<HF module>.lora_A.weight`: PEFT's saved name less its "base_model.model." prefix
//    (PEFT's in-memory ".default" adapter name is never part of a saved name). The base parameters keep
//    their Hugging Face names; modules to save are saved under their own names (peft does the same).
//  - Scaling: forward = base(x) + lora_B(lora_A(dropout(x))) * alpha / r (alpha / sqrt(r) with rsLoRA);
//    lora_A starts as kaiming_uniform(a = sqrt(5)), lora_B as zeros, so a fresh adapter changes nothing.
//    Merging adds scaling * B·A to the base weight ([out, in]), transposed for GPT-2's Conv1D, whose
//    weight is [in, out] (PEFT's fan_in_fan_out, Note [Conv1D weights]).
#pragma once

#include "hpctrain/models/model.hpp"
#include "hpctrain/models/nf4.hpp"
#include "hpctrain/models/weights.hpp"

#include <nlohmann/json.hpp>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hpctrain::models {

// PEFT's LoraConfig, the fields hpctrain uses (adapter_config.json).
struct LoraConfig {
  int64_t r = 8;
  double alpha = 8;    // lora_alpha
  double dropout = 0;  // lora_dropout
  bool use_rslora = false;
  // Module names as in the HF model ("q_lin", "c_attn", a dotted suffix or full name), or {"all-linear"}: every
  // Linear/Conv1D but the output head and the modules to save. Empty: PEFT's default for the model type.
  std::vector<std::string> target_modules;
  std::vector<std::string> modules_to_save;  // PEFT's suffix rule (Note [LoRA])
  std::string task_type;                     // "SEQ_CLS" or "CAUSAL_LM" (set by apply_lora when empty)
  std::string base_model_name_or_path;
  // PEFT's fan_in_fan_out: true when every target is a GPT-2 Conv1D (weight [in, out]), as peft writes it (set by
  // apply_lora; informational: each layer knows its own layout).
  bool fan_in_fan_out = false;
  // Where the values came from (Note [Adapter config checks]): "" for the command line's --lora-* options, else the
  // adapter_config.json path that from_peft_json read.
  std::string origin;
  [[nodiscard]] double scaling() const;
  // How errors name a field of adapter_config.json ("r", "lora_alpha", "lora_dropout", "target_modules"): the
  // option ("--lora-r") for the command line's values, "FILE: field 'r'" for a file's.
  [[nodiscard]] std::string field(const char* name) const;
  // adapter_config.json as peft writes it (every field its LoraConfig needs to load it).
  [[nodiscard]] nlohmann::json to_peft_json() const;
  // From adapter_config.json (`source` names it in errors, with the field: Note [Adapter config checks]): refuses a
  // field of the wrong type or range, and what hpctrain does not implement (another peft_type, DoRA, a bias other
  // than "none", rank or alpha patterns, a regex target list).
  [[nodiscard]] static LoraConfig from_peft_json(const nlohmann::json& json, const std::string& source);
};

class Quant4StateImpl;
// The largest rank hpctrain accepts (peft has no bound; a rank beyond the layers' widths only adds zeros).
inline constexpr int64_t kMostLoraRank = 1 << 16;
// Error naming each field (LoraConfig::field) for an r outside [1, kMostLoraRank], a lora_alpha that is not a
// finite number > 0, or a lora_dropout outside [0, 1).
void check_lora_config(const LoraConfig& config);

// The adapter a LoRA-capable layer carries (LoraTarget): null modules when none is attached.
struct LoraBranch {
  torch::nn::Linear lora_A{nullptr}, lora_B{nullptr};
  double dropout = 0, scaling = 1;
};

// A layer that can carry an adapter: LoraLinear, GPT-2's Conv1D. Its forward returns with_lora(base, x).
class LoraTarget {
 public:
  virtual ~LoraTarget() = default;
  [[nodiscard]] int64_t in_features() const;
  [[nodiscard]] int64_t out_features() const;
  // The base weight as stored: [out, in], or [in, out] when fan_in_fan_out() (Conv1D); no elements while the base
  // is quantized (Note [Quantized base]).
  [[nodiscard]] virtual at::Tensor& base_weight() = 0;
  [[nodiscard]] virtual bool fan_in_fan_out() const = 0;
  [[nodiscard]] virtual torch::nn::Module& as_module() = 0;

  [[nodiscard]] bool has_lora() const { return !lora_.lora_A.is_empty(); }
  // Registers lora_A [r, in] (kaiming_uniform, a = sqrt(5)) and lora_B [out, r] (zeros) on this layer.
  void attach_lora(int64_t r, double scaling, double dropout);
  // base weight += scaling * B·A (transposed for fan_in_fan_out); the adapter is then removed. A quantized base is
  // dequantized first.
  void merge_lora();

  // Note [Quantized base]: the base weight replaced by its 4-bit form ([out, in]; `name` for errors), or back into a
  // float32 parameter (dequantize_base: what the layer computed with).
  void quantize_base(const Quant4Options& options, const std::string& name);
  void dequantize_base();
  [[nodiscard]] bool base_quantized() const { return quantized_ != nullptr; }
  [[nodiscard]] Quant4Weight quantized_base() const;  // requires base_quantized()
  // The adapter's branch of with_lora as two factors, for a caller that applies the product itself (the LM head's
  // chunked loss, Note [LM head] in loss.hpp): branch = input @ weight^T. Undefined tensors without an adapter.
  struct LowRank {
    at::Tensor input;   // dropout(x) @ lora_A^T, [..., r]
    at::Tensor weight;  // scaling * lora_B, [out, r]
  };
  [[nodiscard]] LowRank lora_factors(const at::Tensor& x, bool training) const;

 protected:
  // The weight's sizes as stored (the parameter's, before any quantization).
  [[nodiscard]] virtual int64_t stored_in_features() const = 0;
  [[nodiscard]] virtual int64_t stored_out_features() const = 0;
  // x Wᵀ + b with the 4-bit base (Note [Quantized base]); requires base_quantized().
  [[nodiscard]] at::Tensor quantized_base_output(const at::Tensor& x, const at::Tensor& bias) const;
  // base_output + lora_A(dropout(x)) (scaling · lora_B)ᵀ: peft's lora_B(lora_A(dropout(x))) * scaling with the
  // scaling on B; base_output itself without an adapter.
  [[nodiscard]] at::Tensor with_lora(const at::Tensor& base_output, const at::Tensor& x, bool training) const;

 private:
  LoraBranch lora_;
  std::shared_ptr<Quant4StateImpl> quantized_;  // registered as the submodule "base_4bit" while quantized
};

// torch::nn::Linear that can carry an adapter (same parameters, names and initialization as a Linear).
class LoraLinearImpl : public torch::nn::LinearImpl, public LoraTarget {
 public:
  using torch::nn::LinearImpl::LinearImpl;
  at::Tensor forward(const at::Tensor& x);
  [[nodiscard]] at::Tensor& base_weight() override { return weight; }
  [[nodiscard]] bool fan_in_fan_out() const override { return false; }
  [[nodiscard]] torch::nn::Module& as_module() override { return *this; }

 protected:
  [[nodiscard]] int64_t stored_in_features() const override { return weight.size(1); }
  [[nodiscard]] int64_t stored_out_features() const override { return weight.size(0); }
};
TORCH_MODULE(LoraLinear);

// What apply_lora did, for the log.
struct LoraLayout {
  std::vector<std::string> adapted;       // target layers, full names
  std::vector<std::string> saved_modules;  // modules to save, full names
  int64_t trainable_parameters = 0, total_parameters = 0;
  [[nodiscard]] std::string summary() const;
};

// PEFT's target modules for a model type when none are given (q_lin,v_lin / query,value / c_attn / q_proj,v_proj).
[[nodiscard]] std::vector<std::string> default_lora_targets(const std::string& model_type);
// "SEQ_CLS" for a classifier, "CAUSAL_LM" for a causal LM.
[[nodiscard]] std::string lora_task_type(const Model& model);
// PEFT's modules_to_save for the task: {"classifier", "score"} for SEQ_CLS, none for CAUSAL_LM.
[[nodiscard]] std::vector<std::string> default_modules_to_save(const std::string& task_type);
// The model's LoRA-capable layers (LoraLinear, GPT-2's Conv1D) with their full names, in model order.
[[nodiscard]] std::vector<std::pair<std::string, LoraTarget*>> lora_target_layers(Model& model);
// The model's LoRA-capable layers' short names ("q_lin", "lin1", ...), distinct, in model order.
[[nodiscard]] std::vector<std::string> linear_module_names(Model& model);

// Attaches adapters to the layers config.target_modules names and freezes the base (Note [LoRA]). Resolves
// the config in place: defaults for empty target_modules and task_type, "all-linear" into short names.
// Error listing the model's linear module names for a target that matches none.
LoraLayout apply_lora(Model& model, LoraConfig& config);
// The trainable tensors under PEFT's saved names ("base_model.model." + name).
[[nodiscard]] StateDict adapter_state_dict(const Model& model);
// Strict copy of PEFT-named tensors into the trainable tensors (Error naming `source` and every missing,
// unexpected or wrong-shaped tensor).
void load_adapter_state_dict(Model& model, const StateDict& tensors, const std::string& source);
// Every adapter merged into its base weight and removed: the model is then a plain HF model again.
void merge_lora(Model& model);

constexpr const char* kAdapterConfigName = "adapter_config.json";
constexpr const char* kAdapterWeightsName = "adapter_model.safetensors";
// adapter_config.json and adapter_model.safetensors into `dir` (an existing folder), as peft's save_pretrained.
void write_adapter_files(const Model& model, const LoraConfig& config, const std::filesystem::path& dir);
[[nodiscard]] LoraConfig read_adapter_config(const std::filesystem::path& dir);
// PeftModel.from_pretrained: reads `dir`'s config, applies it to `model` and loads its tensors.
LoraConfig load_adapter(Model& model, const std::filesystem::path& dir);
// load_adapter in two parts: the adapter's layers attached (its config read and checked against the model)...
LoraConfig attach_adapter(Model& model, const std::filesystem::path& dir);
// ...and its tensors copied in (the adapters and the modules to save), e.g. once a 4-bit base is quantized.
void load_adapter_weights(Model& model, const std::filesystem::path& dir);

}  // namespace hpctrain::models
