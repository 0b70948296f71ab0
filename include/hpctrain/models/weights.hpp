// Strict loading of Hugging Face-named tensors into a model, and the model's state dict.
// Not here: files (pretrained.hpp reads and writes folders through io/).
//
// Note [Base checkpoints]
// A checkpoint from pretraining (DistilBertModel, DistilBertForMaskedLM, BertModel, BertForMaskedLM,
// BertForPreTraining) has the encoder but not the classification head. As transformers does, loading
// it into a classifier is not an error:
//   - names without the base prefix ("embeddings.word_embeddings.weight" from a DistilBertModel) get
//     it added ("distilbert.embeddings..."), when no checkpoint name has it;
//   - legacy LayerNorm names "gamma"/"beta" become "weight"/"bias";
//   - the model's head modules (ModelSpec::head_modules: pre_classifier/classifier, BERT's pooler)
//     may be absent as a whole: they keep their from_config (transformers _init_weights) values and
//     are reported as newly initialized;
//   - pretraining heads and legacy buffers (ModelSpec::ignorable_*) are reported as ignored.
// Everything else is strict: a missing encoder tensor, a head module present only in part, any other
// unexpected name, a wrong shape or a non-floating tensor is an Error, all of them in one message.
#pragma once

#include "hpctrain/models/model.hpp"

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

namespace hpctrain::models {

// Tensor name -> tensor, sorted by name.
using StateDict = std::map<std::string, at::Tensor>;

// What load_state_dict did, by name. Model names unless said otherwise.
struct LoadReport {
  std::vector<std::string> loaded;             // filled from the checkpoint
  std::vector<std::string> newly_initialized;  // absent head tensors, left as initialized (Note [Base checkpoints])
  std::vector<std::string> ignored;            // checkpoint names the model does not use
  std::vector<std::string> renamed;            // "old -> new" for legacy gamma/beta names
  std::vector<std::string> converted;          // loaded from another dtype ("name (BFloat16)"), e.g. upcast to fp32
  bool added_base_prefix = false;              // the checkpoint had no base_model_prefix (a bare base model)

  // One line per non-empty list, e.g. "newly initialized (train before use): classifier.bias, ...".
  [[nodiscard]] std::string summary() const;
};

// Copies `tensors` into the model's parameters and buffers (converted to each parameter's dtype and
// device). `source` names the checkpoint in messages (a folder or file). Nothing is modified when it
// throws.
LoadReport load_state_dict(Model& model, const StateDict& tensors, const std::string& source);

// load_state_dict's checks without the copy: the report, and the value each model tensor (state-dict key) takes
// from `tensors`. Reads only the model's names, shapes and dtypes (a model whose parameters are deferred, Note
// [Deferred materialization], can be planned). Error as load_state_dict's.
struct LoadPlan {
  LoadReport report;
  std::map<std::string, at::Tensor> values;  // model key -> the checkpoint's tensor
};
[[nodiscard]] LoadPlan plan_load_state_dict(const Model& model, const StateDict& tensors, const std::string& source);

// Drops the head modules (ModelSpec::head_modules) of `weights` whose shapes no longer fit `model` (another
// number of labels), so that load_state_dict initializes them as for a base checkpoint (Note [Base checkpoints]).
void drop_resized_head(const Model& model, StateDict& weights);

// The model's parameters and persistent buffers by name (sharing storage with the model).
[[nodiscard]] StateDict state_dict(const torch::nn::Module& model);

}  // namespace hpctrain::models
