// optim::Optimizer (optimizer.hpp): parameter groups, the counted step, strict state loading.
#include "hpctrain/optim/optimizer.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/io/dtype.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/tensor_io.hpp"

namespace hpctrain::optim {

std::vector<ParameterGroup> weight_decay_groups(const NamedParameters& named, double weight_decay,
                                               const std::set<std::string>& no_decay) {
  ParameterGroup decay{"decay", weight_decay, {}};
  ParameterGroup no_decay_group{"no_decay", 0.0, {}};
  for (const auto& item : named) (no_decay.count(item.first) ? no_decay_group : decay).parameters.push_back(item);
  std::vector<ParameterGroup> groups;
  for (ParameterGroup* group : {&decay, &no_decay_group})
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
  check_state_dict(state, "optimizer state");
  at::NoGradGuard no_grad;
  copy_state(state);
  steps_ = state.at("step").item<int64_t>();
  state_loaded();
}

void Optimizer::copy_state(const OptimizerState& state) {
  for (const auto& [name, tensor] : state_tensors()) {
    at::Tensor into = tensor;
    into.copy_(state.at(name));
  }
}

// Note [Optimizer state checks]
// A state file can be whole (its checksum matches, names and shapes fit) and still poison the run: a NaN
// absmax turns a block of 8-bit moments into NaN and the weights after one step, a negative absmax or
// second moment flips signs or takes a square root of a negative, int8 codes index the unsigned map as if
// they were uint8, a negative step makes the bias corrections negative. Nothing fails until the loss is
// NaN, steps later, far from the file. So every load checks each tensor against the live state: same
// names, shapes and dtype (no silent conversion: a dtype change is a different file), every floating
// value finite, integer state (step counts, codes) >= 0, and the kinds an optimizer names in
// non_negative_state() >= 0. An absmax of 0 is valid: it is how a block starts, and stays while its
// gradients are 0. read_optimizer_file checks on rank 0 inside run_collectively (Note [Optimizer
// checkpoints]), so the Error names the file and reaches every rank.
namespace {

std::string dtype_text(const at::Tensor& tensor, const std::string& name) {
  return std::string(io::dtype_name(models::to_io_dtype(tensor.scalar_type(), name)));
}

// What is wrong with the values of state tensor `name`, or "" when nothing is.
std::string value_problem(const std::string& name, const at::Tensor& tensor, bool non_negative) {
  if (tensor.numel() == 0 || tensor.scalar_type() == at::kBool) return "";
  const at::Tensor flat = tensor.detach().flatten();
  const bool floating = at::isFloatingType(flat.scalar_type());
  at::Tensor bad = floating ? at::isfinite(flat).logical_not_() : flat < 0;
  if (floating && non_negative) bad.logical_or_(flat < 0);
  const int64_t count = bad.sum().item<int64_t>();
  if (count == 0) return "";
  const int64_t first = at::nonzero(bad)[0][0].item<int64_t>();
  const c10::Scalar value = flat[first].item();
  const std::string shown = floating ? fmt::format("{}", value.toDouble()) : fmt::format("{}", value.toLong());
  const std::string expected = !floating      ? "an integer >= 0"
                               : non_negative ? "a finite number >= 0"
                                              : "a finite number";
  if (flat.numel() == 1) return fmt::format("'{}' is {}, expected {}", name, shown, expected);
  return fmt::format("'{}' holds {} at element {} ({} of {} values bad), expected {}", name, shown, first, count,
                     flat.numel(), expected);
}

}  // namespace

void Optimizer::check_state_dict(const OptimizerState& state, const std::string& source) const {
  const OptimizerState expected = state_layout();
  const std::set<std::string> magnitudes = non_negative_state();
  std::vector<std::string> problems;
  for (const auto& [name, tensor] : expected) {
    const auto it = state.find(name);
    if (it == state.end()) {
      problems.push_back(fmt::format("missing '{}'", name));
      continue;
    }
    const at::Tensor& got = it->second;
    // "step" is one number: files written as a 1-element tensor load too.
    if (name == "step" ? got.numel() != 1 : got.sizes() != tensor.sizes()) {
      problems.push_back(name == "step" ? fmt::format("'step' has {} elements, expected 1", got.numel())
                                        : fmt::format("'{}' has shape [{}], expected [{}]", name,
                                                      fmt::join(got.sizes(), ", "), fmt::join(tensor.sizes(), ", ")));
    } else if (got.scalar_type() != tensor.scalar_type()) {
      problems.push_back(fmt::format("'{}' is {}, expected {}", name, dtype_text(got, name), dtype_text(tensor, name)));
    } else if (std::string bad = value_problem(name, got, magnitudes.count(name.substr(0, name.find('.'))) > 0);
               !bad.empty()) {
      problems.push_back(std::move(bad));
    }
  }
  for (const auto& [name, tensor] : state)
    if (!expected.count(name)) problems.push_back(fmt::format("unexpected '{}'", name));
  HPCTRAIN_CHECK(problems.empty(), "{}: not a valid state of this {} optimizer for this model: {} problem(s): {}",
                 source, type(), problems.size(), fmt::join(problems, "; "));
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
  save_optimizer_file(path, optimizer, optimizer.state_dict());
}

void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer, const OptimizerState& state) {
  const models::HostViews host = models::host_views(state);
  io::save_safetensors(path, host.views, optimizer_file_metadata(optimizer));
}

void save_optimizer_file(const std::filesystem::path& path, const Optimizer& optimizer, const OptimizerState& layout,
                         const io::TensorData& data) {
  io::save_safetensors(path, models::layout_views(layout), optimizer_file_metadata(optimizer), data);
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
  std::string changed;
  if (hyper != metadata.end() && hyper->second != ours)
    changed = fmt::format("'{}': the optimizer's hyper-parameters were {}, this run's are {} (this run's apply)",
                          path.string(), hyper->second, ours);
  OptimizerState state;
  for (const io::TensorView& view : file.tensors()) state.emplace(view.name, models::to_tensor(view));
  try {
    optimizer.check_state_dict(state, fmt::format("'{}'", path.string()));  // Note [Optimizer state checks]
  } catch (const Error& error) {
    if (changed.empty()) throw;
    throw Error(fmt::format("{}\n  note: {}", error.what(), changed));  // a changed beta1 changes the tensors
  }
  if (note != nullptr) *note = changed;
  return state;
}

}  // namespace hpctrain::optim
