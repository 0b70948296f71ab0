// train::Optimizer (optimizer.hpp): parameter groups, the counted step, strict state loading.
#include "hpctrain/train/optimizer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/tensor_io.hpp"

namespace hpctrain::train {

bool excluded_from_weight_decay(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with("bias")) return true;
  return name.find("LayerNorm.") != std::string::npos || name.find("layer_norm.") != std::string::npos;
}

std::vector<ParameterGroup> weight_decay_groups(const NamedParameters& named, double weight_decay) {
  ParameterGroup decay{"decay", weight_decay, {}};
  ParameterGroup no_decay{"no_decay", 0.0, {}};
  for (const auto& item : named) (excluded_from_weight_decay(item.first) ? no_decay : decay).parameters.push_back(item);
  std::vector<ParameterGroup> groups;
  for (ParameterGroup* group : {&decay, &no_decay})
    if (!group->parameters.empty()) groups.push_back(std::move(*group));
  return groups;
}

Optimizer::Optimizer(std::vector<ParameterGroup> groups) : groups_(std::move(groups)) {
  std::set<std::string> names;
  for (const ParameterGroup& group : groups_) {
    for (const auto& [name, tensor] : group.parameters) {
      HPCTRAIN_CHECK(names.insert(name).second, "optimizer: parameter '{}' is in more than one group (or twice)", name);
      HPCTRAIN_CHECK(tensor.defined(), "optimizer: parameter '{}' is an undefined tensor", name);
      parameters_.push_back(Parameter{name, tensor, group.weight_decay});
    }
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  update(lr);
}

void Optimizer::zero_grad() {
  for (const Parameter& p : parameters_) {
    at::Tensor grad = p.tensor.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

OptimizerState Optimizer::state_dict() const {
  OptimizerState state = state_tensors();
  state["step"] = at::scalar_tensor(steps_, at::kLong);
  return state;
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, tensor] : state_tensors()) bytes += static_cast<int64_t>(tensor.nbytes());
  return bytes;
}

void Optimizer::load_state_dict(const OptimizerState& state) {
  const auto step = state.find("step");
  HPCTRAIN_CHECK(step != state.end() && step->second.numel() == 1,
                 "optimizer state does not fit the model: {}", step == state.end() ? "missing 'step'"
                 : fmt::format("'step' has {} elements, expected 1", step->second.numel()));
  OptimizerState tensors = state;
  tensors.erase("step");
  models::copy_tensors_strict(tensors, state_tensors(), "optimizer state does not fit the model");
  steps_ = step->second.item<int64_t>();
}

// Note [Optimizer checkpoints]
// optimizer.safetensors says whose state it holds: "optimizer" is the type tag (Hugging Face's --optim
// name), "optimizer_hyperparameters" what shaped the state. A resume with another --optim is refused
// naming both, before any tensor is copied (the strict name check would only list tensors). Files from
// before the tag held AdamW's state (adamw_torch). Accelerator::load_tensors reads on rank 0, inside
// run_collectively: every rank gets the same Error.
std::map<std::string, std::string> optimizer_file_metadata(const Optimizer& optimizer) {
  nlohmann::json hyperparameters = optimizer.hyperparameters();
  for (const ParameterGroup& group : optimizer.parameter_groups())
    hyperparameters["weight_decay"][group.name] = group.weight_decay;
  return {{"format", "pt"}, {"optimizer", optimizer.type()}, {"optimizer_hyperparameters", hyperparameters.dump()}};
}

void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer) {
  const models::HostViews host = models::host_views(optimizer.state_dict());
  io::save_safetensors(path, host.views, optimizer_file_metadata(optimizer));
}

OptimizerState read_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer, std::string* note) {
  const io::SafetensorsFile file(path);
  const auto& metadata = file.metadata();
  const auto tag = metadata.find("optimizer");
  const std::string saved = tag == metadata.end() ? "adamw_torch" : tag->second;
  HPCTRAIN_CHECK(saved == optimizer.type(), "'{}' holds the state of optimizer '{}'{}, but this run uses '{}'\n  hint: "
                 "resume with --optim {}, or start a new run (--overwrite-output-dir)", path.string(), saved,
                 tag == metadata.end() ? " (no optimizer tag: written before tags, by AdamW)" : "", optimizer.type(),
                 saved);
  const auto hyper = metadata.find("optimizer_hyperparameters");
  const std::string ours = optimizer_file_metadata(optimizer).at("optimizer_hyperparameters");
  if (note != nullptr && hyper != metadata.end() && hyper->second != ours)
    *note = fmt::format("'{}': the optimizer's hyper-parameters were {}, this run's are {} (this run's apply)",
                        path.string(), hyper->second, ours);
  OptimizerState state;
  for (const io::TensorView& view : file.tensors()) state.emplace(view.name, models::to_tensor(view));
  return state;
}

}  // namespace hpctrain::train
