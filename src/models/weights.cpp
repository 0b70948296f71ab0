// Strict, Hugging Face-compatible loading of named tensors (see weights.hpp, Note [Base checkpoints]).
#include "hpctrain/models/weights.hpp"

#include "hpctrain/core/error.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace hpctrain::models {

namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string join(const std::vector<std::string>& items) { return fmt::format("{}", fmt::join(items, ", ")); }

std::string shape_of(const at::Tensor& t) { return c10::str(t.sizes()); }

// transformers' _fix_key: TF-era LayerNorm names.
std::string legacy_rename(const std::string& name) {
  if (ends_with(name, ".gamma")) return name.substr(0, name.size() - 5) + "weight";
  if (ends_with(name, ".beta")) return name.substr(0, name.size() - 4) + "bias";
  return name;
}

bool is_ignorable(const ModelSpec& spec, const std::string& name) {
  return std::any_of(spec.ignorable_prefixes.begin(), spec.ignorable_prefixes.end(),
                     [&](const std::string& p) { return starts_with(name, p); }) ||
         std::any_of(spec.ignorable_suffixes.begin(), spec.ignorable_suffixes.end(),
                     [&](const std::string& s) { return ends_with(name, s); });
}

// The head module (ModelSpec::head_modules) a model name belongs to, or "".
std::string head_module_of(const ModelSpec& spec, const std::string& name) {
  for (const auto& head : spec.head_modules) {
    if (starts_with(name, head + ".")) return head;
  }
  return "";
}

// One checkpoint tensor under the name the model uses.
struct Incoming {
  std::string original;
  const at::Tensor* tensor;
};

// Everything that prevents loading, collected so that one message names all of it.
struct Problems {
  std::vector<std::string> missing, unexpected, wrong_shape, wrong_dtype, duplicate;
  [[nodiscard]] bool empty() const {
    return missing.empty() && unexpected.empty() && wrong_shape.empty() && wrong_dtype.empty() && duplicate.empty();
  }
};

// `encoder_matches`: checkpoint tensors found for model names outside the head modules.
[[noreturn]] void throw_problems(const Problems& p, const Model& model, const std::string& source,
                                 std::size_t encoder_matches) {
  const ModelSpec& spec = model.spec();
  std::string message = fmt::format(
      "cannot load {} into {} ({}): {} missing, {} unexpected, {} wrong-shaped, {} wrong-typed tensor(s)", source,
      spec.architecture, spec.model_type, p.missing.size(), p.unexpected.size(), p.wrong_shape.size(),
      p.wrong_dtype.size());
  auto section = [&](const char* title, const std::vector<std::string>& items) {
    if (!items.empty()) message += fmt::format("\n  {}: {}", title, join(items));
  };
  section("missing", p.missing);
  section("unexpected", p.unexpected);
  section("wrong shape (expected vs checkpoint)", p.wrong_shape);
  section("wrong dtype (expected floating point)", p.wrong_dtype);
  section("duplicate (two checkpoint names for one tensor)", p.duplicate);
  if (encoder_matches == 0) {
    message += fmt::format("\n---> HINT: no tensor matched; is this a {} checkpoint? (config.json model_type)",
                           spec.model_type);
  } else if (!p.wrong_shape.empty()) {
    message += "\n---> HINT: config.json must describe the checkpoint (num_labels / id2label, hidden sizes, "
               "vocab_size)";
  }
  throw Error(message);
}

}  // namespace

StateDict state_dict(const torch::nn::Module& model) {
  StateDict out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) out.emplace(item.key(), item.value());
  for (const auto& item : model.named_buffers(/*recurse=*/true)) out.emplace(item.key(), item.value());
  return out;
}

LoadReport load_state_dict(Model& model, const StateDict& tensors, const std::string& source) {
  LoadPlan plan = plan_load_state_dict(model, tensors, source);
  const StateDict expected = state_dict(model);
  // 4. Copy (converting dtype and device); nothing before this modified the model.
  at::NoGradGuard no_grad;
  for (const auto& [key, value] : plan.values) {
    at::Tensor target = expected.at(key);  // shares storage with the parameter
    target.copy_(value);
  }
  return std::move(plan.report);
}

LoadPlan plan_load_state_dict(const Model& model, const StateDict& tensors, const std::string& source) {
  const ModelSpec& spec = model.spec();
  const StateDict expected = state_dict(model);
  LoadReport report;
  Problems problems;

  // 1. Checkpoint names -> model names: legacy gamma/beta, and the base prefix for a bare base model
  //    (only where the prefixed name is the model's; cf. transformers' _load_pretrained_model).
  const std::string prefix = spec.base_model_prefix.empty() ? "" : spec.base_model_prefix + ".";
  const bool bare_base = !prefix.empty() && !tensors.empty() &&
                         std::none_of(tensors.begin(), tensors.end(),
                                      [&](const auto& item) { return starts_with(item.first, prefix); });
  std::map<std::string, Incoming> incoming;
  for (const auto& [name, tensor] : tensors) {
    std::string key = legacy_rename(name);
    if (key != name) report.renamed.push_back(name + " -> " + key);
    if (bare_base && !expected.count(key) && expected.count(prefix + key)) {
      key = prefix + key;
      report.added_base_prefix = true;
    }
    const auto [it, inserted] = incoming.emplace(key, Incoming{name, &tensor});
    if (!inserted) problems.duplicate.push_back(fmt::format("{} and {} -> {}", it->second.original, name, key));
  }

  // 2. Every model tensor: present with the right shape, or absent as part of a whole head module.
  std::map<std::string, std::size_t> head_present;  // head module -> tensors of it in the checkpoint
  std::size_t encoder_matches = 0;
  for (const auto& [key, param] : expected) {
    const std::string head = head_module_of(spec, key);
    if (incoming.count(key) == 0) continue;
    if (head.empty()) ++encoder_matches;
    else ++head_present[head];
    const at::Tensor& value = *incoming.at(key).tensor;
    if (value.sizes() != param.sizes()) {
      problems.wrong_shape.push_back(fmt::format("{} {} vs {}", key, shape_of(param), shape_of(value)));
    } else if (param.is_floating_point() != value.is_floating_point()) {
      problems.wrong_dtype.push_back(fmt::format("{} ({})", key, std::string(c10::toString(value.scalar_type()))));
    }
  }
  for (const auto& [key, param] : expected) {
    if (incoming.count(key)) continue;
    const std::string head = head_module_of(spec, key);
    if (!head.empty() && head_present[head] == 0) report.newly_initialized.push_back(key);
    else problems.missing.push_back(key);
  }

  // 3. Checkpoint tensors the model does not have.
  for (const auto& [key, in] : incoming) {
    if (expected.count(key)) continue;
    if (is_ignorable(spec, key)) report.ignored.push_back(in.original);
    else problems.unexpected.push_back(in.original);
  }
  if (!problems.empty()) throw_problems(problems, model, source, encoder_matches);

  LoadPlan plan;
  for (const auto& [key, param] : expected) {
    const auto it = incoming.find(key);
    if (it == incoming.end()) continue;
    const at::Tensor& value = *it->second.tensor;
    plan.values.emplace(key, value);
    report.loaded.push_back(key);
    if (value.scalar_type() != param.scalar_type()) {
      report.converted.push_back(fmt::format("{} ({})", key, std::string(c10::toString(value.scalar_type()))));
    }
  }
  plan.report = std::move(report);
  return plan;
}

void drop_resized_head(const Model& model, StateDict& weights) {
  const StateDict own = state_dict(model);
  for (const std::string& module : model.spec().head_modules) {
    const std::string prefix = module + ".";
    bool mismatch = false;
    for (const auto& [name, tensor] : weights) {
      const auto it = own.find(name);
      if (starts_with(name, prefix) && it != own.end() && it->second.sizes() != tensor.sizes()) mismatch = true;
    }
    if (!mismatch) continue;
    for (auto it = weights.begin(); it != weights.end();) it = starts_with(it->first, prefix) ? weights.erase(it) : ++it;
  }
}

std::string LoadReport::summary() const {
  std::string out = fmt::format("loaded {} tensor(s)", loaded.size());
  if (added_base_prefix) out += " (a bare base model: base_model_prefix added)";
  // Lists are for logs: the first dozen names, then a count.
  constexpr std::size_t kShown = 12;
  auto section = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    const std::vector<std::string> shown(items.begin(), items.begin() + std::min(items.size(), kShown));
    out += fmt::format("\n  {} ({}): {}", title, items.size(), join(shown));
    if (items.size() > kShown) out += fmt::format(", ... and {} more", items.size() - kShown);
  };
  section("newly initialized, train before use", newly_initialized);
  section("ignored", ignored);
  section("renamed", renamed);
  section("converted to the parameter dtype", converted);
  return out;
}

}  // namespace hpctrain::models
