// Deferred parameters (materialize.hpp).
#include "hpctrain/models/materialize.hpp"

#include <ATen/core/grad_mode.h>
#include <c10/core/StorageImpl.h>
#include <torch/utils.h>

#include <unordered_set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/models/registry.hpp"

// Note [Deferred materialization]
// With --zero-stage 3 no rank should hold the whole fp32 model at start. train::build_model builds a model
// inside a DeferredParameters scope: the model's constructor calls defer_parameters() on each part it has built
// (the embeddings, each transformer layer, the final norm, the head), which frees the memory of its parameters
// (the storage keeps its object and the tensor its shape, as a released unit of Note [Sharded parameters]), so
// building holds one part at a time; the constructor's init_weights() skips what has no memory (initializes()).
// The parameters are then materialized: allocated and initialized by the model's own init_weights() with a
// filter that lets it write one parameter at a time, from LibTorch's CPU generator seeded by (seed, the
// parameter's name). A parameter's values are thus a function of the seed and its name alone — not of which
// other parameters exist yet, the order, the rank or the number of ranks — so stage 0 (materialize_all right
// after building) and stage 3 (FullySharded::prepare_model: unit by unit, each unit's slices kept in the shards
// and the unit freed before the next) start from the same weights, on any number of ranks, without a
// broadcast. Building outside the scope (from_config, from_pretrained, the estimates) initializes as before,
// from the generator's stream in module order. Pretrained weights (--model) at stage 3: the model's
// DeferredValues hold views into the memory-mapped files (train's load_weights, after the same checks as
// load_state_dict), and a parameter with a loaded value is copied from it instead of initialized. LoRA adapts a
// materialized model (train::build_model materializes first).
namespace hpctrain::models {
namespace {

thread_local int deferring = 0;                                     // DeferredParameters scopes alive
thread_local const std::unordered_set<const void*>* only = nullptr;  // materialize(): what init_weights writes


// FNV-1a of the name: the parameter's stream (Note [Deferred materialization]).
uint64_t name_hash(const std::string& name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return hash;
}

}  // namespace

bool is_deferred(const at::Tensor& tensor) {
  return tensor.numel() > 0 &&
         tensor.storage().nbytes() < static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
}

DeferredParameters::DeferredParameters() { ++deferring; }
DeferredParameters::~DeferredParameters() { --deferring; }

void defer_parameters(torch::nn::Module& module) {
  if (deferring == 0) return;
  for (const at::Tensor& param : module.parameters()) {
    c10::StorageImpl* storage = param.storage().unsafeGetStorageImpl();
    storage->set_data_ptr(at::DataPtr(nullptr, param.device()));  // the memory is freed here
    storage->set_nbytes(0);
  }
}

bool initializes(const at::Tensor& tensor) {
  if (only != nullptr) return only->count(tensor.unsafeGetTensorImpl()) > 0;
  return !is_deferred(tensor);
}

void mark_deferred(Model& model, uint64_t seed) { model.set_deferred_seed(seed); }

void materialize(Model& model, const std::vector<std::string>& names) {
  const std::optional<uint64_t> seed = model.deferred_seed();
  HPCTRAIN_CHECK(seed.has_value(), "materialize: {} was not built with deferred parameters", model.name());
  const auto parameters = model.named_parameters();
  for (const std::string& name : names) {
    const at::Tensor* found = parameters.find(name);
    HPCTRAIN_CHECK(found != nullptr, "materialize: {} has no parameter '{}'", model.name(), name);
    const at::Tensor& param = *found;
    if (!is_deferred(param)) continue;
    c10::StorageImpl* storage = param.storage().unsafeGetStorageImpl();
    const auto nbytes = static_cast<std::size_t>(param.numel()) * param.element_size();
    storage->set_data_ptr(storage->allocator()->allocate(nbytes));
    storage->set_nbytes(nbytes);
    if (const auto& loaded = model.deferred_values()) {  // pretrained: the checkpoint's value when it has one
      const auto value = loaded->values.find(name);
      if (value != loaded->values.end()) {
        at::NoGradGuard no_grad;
        at::Tensor target = param;
        target.copy_(value->second);
        if (loaded->release) loaded->release(value->second);
        continue;
      }
    }
    const std::unordered_set<const void*> this_one{param.unsafeGetTensorImpl()};
    only = &this_one;
    try {
      torch::manual_seed(derive_seed(*seed, name_hash(name)));
      model.init_weights();
    } catch (...) {
      only = nullptr;
      throw;
    }
    only = nullptr;
  }
}

std::shared_ptr<Model> build_seeded_model(const io::HfConfig& config, uint64_t seed, bool keep_deferred) {
  torch::manual_seed(seed);  // what the constructors draw (the vision models' weights)
  std::shared_ptr<Model> model;
  {
    const DeferredParameters deferred;
    model = build_model(config);
  }
  mark_deferred(*model, seed);
  if (!keep_deferred) materialize_all(*model);
  return model;
}

void materialize_all(Model& model) {
  if (!model.deferred_seed()) return;
  std::vector<std::string> names;
  for (const auto& item : model.named_parameters()) names.push_back(item.key());
  materialize(model, names);
  model.set_deferred_seed(std::nullopt);
}

}  // namespace hpctrain::models
