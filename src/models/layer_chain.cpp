// The layer runner chain of Model (Note [Layer runner chain] in model.hpp).
#include "hpctrain/models/model.hpp"

namespace hpctrain::models {

void Model::set_layer_link(LayerLinkPlace place, LayerLink link) {
  links_.at(static_cast<std::size_t>(place)) = std::move(link);
  build_chain();
}

void Model::set_layer_runner(LayerRunner runner) {
  if (!runner) return set_layer_link(LayerLinkPlace::custom, LayerLink());
  set_layer_link(LayerLinkPlace::custom,
                 [runner = std::move(runner)](TransformerLayer& layer, const at::Tensor& hidden,
                                              const LayerContext& context, const LayerRunner&) {
                   return runner(layer, hidden, context);
                 });
}

// chain_[i] runs the i-th installed link (outermost first) with chain_[i + 1] as its next; the last entry runs the
// layer itself. The entries refer to each other by index through `this`, so moving the vector is harmless.
void Model::build_chain() {
  std::vector<const LayerLink*> installed;
  for (const LayerLink& link : links_)
    if (link) installed.push_back(&link);
  chain_.clear();
  if (installed.empty()) return;
  for (std::size_t i = 0; i < installed.size(); ++i) {
    chain_.push_back([this, i, link = installed[i]](TransformerLayer& layer, const at::Tensor& hidden,
                                                    const LayerContext& context) {
      return (*link)(layer, hidden, context, chain_[i + 1]);
    });
  }
  chain_.push_back([](TransformerLayer& layer, const at::Tensor& hidden, const LayerContext& context) {
    return layer.forward(hidden, context);
  });
}

}  // namespace hpctrain::models
