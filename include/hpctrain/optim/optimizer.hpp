// optim::Optimizer, the seam between training and update rules: the Accelerator, the trainer and custom
// loops (examples/custom_loop.cpp) step, zero, save and load any optimizer through it. Implementations:
// AdamW (adamw.hpp), Sgd (sgd.hpp), Adafactor (adafactor.hpp); make_optimizer builds one from
// OptimizerOptions (optimizer_options.hpp) by Hugging Face Trainer's --optim name.
//
// Parameter groups are the interface's, not an implementation's: weight_decay_groups() puts biases and
// normalisation weights in a group without weight decay (as Hugging Face's Trainer, Note [Weight decay groups] in
// models/weight_decay.hpp), and every update rule
// reads each parameter's weight decay from its group. State is named by parameter name, so a checkpoint
// (optimizer.safetensors) fits any number of ranks.
#pragma once

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/optim/optimizer_options.hpp"

namespace hpctrain::optim {

using NamedParameters = std::vector<std::pair<std::string, at::Tensor>>;
using OptimizerState = std::map<std::string, at::Tensor>;  // state tensor name -> tensor

struct ParameterGroup {
  std::string name;           // "decay", "no_decay", or a custom loop's own
  double weight_decay = 0.0;  // of every parameter in the group
  NamedParameters parameters;
};
// Hugging Face Trainer's two groups: "decay" (weight_decay) and "no_decay" (the parameters `no_decay` names: 0),
// each in the order of `named`; an empty group is left out. The one grouping of every optimizer path
// (make_optimizer, AdamW's named constructor, the Accelerator's ZeRO optimizer); `no_decay` comes from the model:
// models::no_weight_decay_parameters(model) (Note [Weight decay groups]).
[[nodiscard]] std::vector<ParameterGroup> weight_decay_groups(const NamedParameters& named, double weight_decay,
                                                              const std::set<std::string>& no_decay);

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update with learning rate `lr` (the schedule's value; an optimizer with its own step size, such as
  // Adafactor with relative_step, ignores it) from the parameters' current .grad. A parameter without a
  // gradient is left untouched, as torch does. Runs without autograd recording.
  void step(double lr);
  // Zeroes every parameter's gradient in place (Accelerator::zero_grad sets them to none instead).
  void zero_grad();
  // step() calls so far (restored by load_state_dict).
  [[nodiscard]] int64_t steps() const { return steps_; }

  // The type tag written into checkpoints: Hugging Face's --optim name ("adamw_torch", "sgd", ...).
  [[nodiscard]] virtual std::string type() const = 0;
  // The hyper-parameters that shape the update (not the learning rate), as a small JSON object.
  [[nodiscard]] virtual nlohmann::json hyperparameters() const = 0;

  // The state as named tensors: the implementation's per-parameter tensors (on the parameters' device)
  // plus "step" (CPU int64 scalar). The tensors are the live state: copy them to keep a snapshot.
  [[nodiscard]] OptimizerState state_dict() const;
  // Strict: check_state_dict(state, "optimizer state"), then the values are copied in.
  void load_state_dict(const OptimizerState& state);
  // Whether `state` can be this optimizer's (Note [Optimizer state checks]): every state tensor and "step"
  // present with its shape and dtype, none unexpected, every value finite, counts and the magnitudes
  // (second moments, absmax) >= 0. One Error naming `source` (the file) and every problem by tensor,
  // expected and actual.
  void check_state_dict(const OptimizerState& state, const std::string& source) const;
  // Bytes of the state tensors (what state_dict() holds besides "step"); a sharded optimizer's: this rank's.
  [[nodiscard]] virtual int64_t state_bytes() const;
  // What a checkpoint of this optimizer holds: names, shapes and dtypes (values unspecified; may be meta
  // tensors). state_dict() for an optimizer that holds its whole state; a sharded one (ZeRO) answers with the
  // whole, stage-0 layout (Note [ZeRO checkpoints] in src/train/zero_optimizer.cpp). check_state_dict checks
  // against it.
  [[nodiscard]] virtual OptimizerState state_layout() const { return state_dict(); }

  [[nodiscard]] const std::vector<ParameterGroup>& parameter_groups() const { return groups_; }
  // The kinds of state tensor (a name up to its first '.') that hold magnitudes, such as second moments
  // and absmax: check_state_dict refuses negative values in them. Integer state (counts, 8-bit codes)
  // is always checked >= 0, floating state finite.
  [[nodiscard]] virtual std::set<std::string> non_negative_state() const { return {}; }

 protected:
  explicit Optimizer(std::vector<ParameterGroup> groups);

  struct Parameter {
    std::string name;
    at::Tensor tensor;
    double weight_decay = 0.0;  // its group's
  };
  // Every parameter of every group, in group order.
  [[nodiscard]] const std::vector<Parameter>& parameters() const { return parameters_; }

  // The update of step steps() (already counted) for every parameter with a gradient.
  virtual void update(double lr) = 0;
  // load_state_dict's copy of a checked `state` into the live state tensors ("step" is the base's).
  virtual void copy_state(const OptimizerState& state);
  // Called at the end of load_state_dict, after the state tensors were overwritten: an optimizer that mirrors
  // state on the host (step counters, so that update() never reads the device) refreshes the mirror here.
  virtual void state_loaded() {}
  // The live per-parameter state tensors, by name ("step" is the base's).
  [[nodiscard]] virtual OptimizerState state_tensors() const = 0;

 private:
  std::vector<ParameterGroup> groups_;
  std::vector<Parameter> parameters_;
  int64_t steps_ = 0;
};

// ---- optimizer.safetensors (Note [Optimizer checkpoints]) ----
// The file's __metadata__: {"format": "pt", "optimizer": type(), "optimizer_hyperparameters": JSON text of
// hyperparameters() plus each group's weight decay}.
[[nodiscard]] std::map<std::string, std::string> optimizer_file_metadata(const Optimizer& optimizer);
// Writes state_dict() (CPU copies) with that metadata, atomically.
void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer);
// Writes `state` (a whole state, e.g. a sharded optimizer's gathered one) with `optimizer`'s metadata.
void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer, const OptimizerState& state);
// As above, `layout` naming each tensor with its whole shape and dtype, tensor i's bytes (i an index into
// models::layout_views(layout)) from data(i) as the file is written (Note [Streamed writes] in
// src/train/streamed_save.cpp).
void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer, const OptimizerState& layout,
                         const io::TensorData& data);
// Reads `path` for `optimizer`: Error naming the file and both optimizers when it holds another optimizer's
// state (a file without the tag, written before tags existed, holds AdamW's), and naming the file and the
// tensor when check_state_dict refuses it. `note` receives a line when the hyper-parameters differ from the
// file's (the run's apply). Load with load_state_dict.
[[nodiscard]] OptimizerState read_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer,
                                                 std::string* note = nullptr);

// The optimizer `options.optim` names (an alias resolved), over weight_decay_groups(named, weight_decay, no_decay)
// (no_decay: models::no_weight_decay_parameters(model)). Error naming --optim and listing the names when it is
// unknown; validate_optimizer_options first.
[[nodiscard]] std::unique_ptr<Optimizer> make_optimizer(const OptimizerOptions& options, const NamedParameters& named,
                                                        const std::set<std::string>& no_decay);
// ---- ZeRO (Note [ZeRO slices] in src/dist/zero_slices.cpp) ----
// Elements a segment of a parameter of `numel` elements must start at a multiple of (counted from the
// parameter's start) for the optimizer `options.optim` names to update it exactly as it updates the whole
// parameter: 256 (the quantization block) for 8-bit AdamW's quantized parameters, else 1.
[[nodiscard]] int64_t segment_alignment(const OptimizerOptions& options, int64_t numel);
// The largest segment_alignment any --optim asks of a parameter of `numel` elements: ZeRO-3 lays its parameters
// out when the model is prepared, before the optimizer is known (Note [Sharded parameters]).
[[nodiscard]] int64_t any_segment_alignment(int64_t numel);
// The optimizer `options.optim` names over `groups` of parameter segments, deciding per-parameter choices by
// the whole parameter (`full_numels`, one per segment in group order: 8-bit AdamW quantizes a segment of a
// parameter of >= 4,096 elements however small the segment). Adafactor's factored moments need whole
// matrices: Error naming --optim and --zero-stage.
[[nodiscard]] std::unique_ptr<Optimizer> make_segment_optimizer(const OptimizerOptions& options,
                                                                std::vector<ParameterGroup> groups,
                                                                const std::vector<int64_t>& full_numels);
// Bytes of state the optimizer `options.optim` names keeps for one fp32 parameter of `shape` (what its
// state_bytes() adds up, without building it): estimate-memory's optimizer row.
[[nodiscard]] int64_t optimizer_state_bytes(const OptimizerOptions& options, const std::vector<int64_t>& shape);

}  // namespace hpctrain::optim
