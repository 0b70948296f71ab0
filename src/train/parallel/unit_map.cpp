// plan_units (unit_map.hpp) and zero3_unit_shapes (parallel/units.hpp).
#include "unit_map.hpp"

#include <algorithm>

#include "hpctrain/core/error.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/train/parallel/units.hpp"

namespace hpctrain::train::parallel {
namespace {

using models::UnitKind;

void claim(torch::nn::Module& module, std::size_t unit, std::unordered_map<const void*, std::size_t>& owner) {
  for (const at::Tensor& param : module.parameters()) owner.emplace(param.unsafeGetTensorImpl(), unit);
}

std::vector<std::size_t> owners_of(const std::vector<torch::nn::Module*>& modules,
                                   const std::unordered_map<const void*, std::size_t>& owner) {
  std::vector<std::size_t> units;
  for (torch::nn::Module* module : modules)
    for (const at::Tensor& param : module->parameters()) units.push_back(owner.at(param.unsafeGetTensorImpl()));
  std::sort(units.begin(), units.end());
  units.erase(std::unique(units.begin(), units.end()), units.end());
  return units;
}

}  // namespace

UnitMap plan_units(models::Model& model) {
  const std::vector<models::TransformerLayer*> layers = model.transformer_layers();
  const std::vector<torch::nn::Module*> embeddings = model.unit_modules(UnitKind::embeddings);
  const std::vector<torch::nn::Module*> head = model.unit_modules(UnitKind::head);
  HPCTRAIN_CHECK(!layers.empty() && !embeddings.empty() && !head.empty(), "--zero-stage 3: {} has no transformer "
                 "layers, embeddings and head to shard by (DistilBERT, BERT, GPT-2, Llama and Qwen2 have)\n  hint: use "
                 "--zero-stage 2", model.spec().architecture);
  // Candidate units: 0 embeddings, 1..n the layers, n + 1 the head, n + 2 the rest; layers claim first.
  const std::size_t head_unit = layers.size() + 1, rest_unit = layers.size() + 2;
  std::unordered_map<const void*, std::size_t> owner;
  for (std::size_t i = 0; i < layers.size(); ++i) claim(*layers[i], i + 1, owner);
  for (torch::nn::Module* module : embeddings) claim(*module, 0, owner);
  for (torch::nn::Module* module : head) claim(*module, head_unit, owner);
  std::vector<ddp::ShardedParameters::Unit> candidates(rest_unit + 1);
  candidates[0].name = "embeddings";
  for (std::size_t i = 0; i < layers.size(); ++i) candidates[i + 1].name = "transformer layer " + std::to_string(i);
  candidates[head_unit].name = "head";
  candidates[rest_unit].name = "rest";
  for (const auto& item : model.named_parameters()) {
    const auto found = owner.find(item.value().unsafeGetTensorImpl());
    candidates[found == owner.end() ? rest_unit : found->second].parameters.emplace_back(item.key(), item.value());
  }
  UnitMap map;
  std::vector<std::size_t> index(candidates.size(), kNoUnit);  // candidate -> unit
  for (std::size_t c = 0; c < candidates.size(); ++c) {
    if (candidates[c].parameters.empty()) continue;
    index[c] = map.units.size();
    map.units.push_back(std::move(candidates[c]));
  }
  const auto to_units = [&](std::vector<std::size_t> found) {
    for (std::size_t& c : found) c = index[c];
    return found;
  };
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (index[i + 1] != kNoUnit) map.layer_unit.emplace(layers[i], index[i + 1]);
  map.embeddings = to_units(owners_of(embeddings, owner));
  map.head = to_units(owners_of(head, owner));
  map.rest = index[rest_unit];
  for (std::size_t unit : map.embeddings)
    if (std::find(map.head.begin(), map.head.end(), unit) != map.head.end()) map.kept.push_back(unit);
  for (std::size_t c : {head_unit, rest_unit}) if (index[c] != kNoUnit) map.backward_order.push_back(index[c]);
  for (std::size_t i = layers.size(); i-- > 0;) if (index[i + 1] != kNoUnit) map.backward_order.push_back(index[i + 1]);
  if (index[0] != kNoUnit) map.backward_order.push_back(index[0]);
  return map;
}


std::vector<UnitShapes> zero3_unit_shapes(const io::HfConfig& config) {
  const std::shared_ptr<models::Model> model = models::build_model(config);
  const UnitMap map = plan_units(*model);
  std::vector<UnitShapes> out;
  for (std::size_t u = 0; u < map.units.size(); ++u) {
    const ddp::ShardedParameters::Unit& unit = map.units[u];
    UnitShapes shapes{unit.name, {}, std::find(map.kept.begin(), map.kept.end(), u) != map.kept.end()};
    for (const auto& [name, param] : unit.parameters) shapes.parameters.emplace_back(name, param.sizes().vec());
    out.push_back(std::move(shapes));
  }
  return out;
}

}  // namespace hpctrain::train::parallel
