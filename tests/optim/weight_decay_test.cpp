// Weight decay grouped as Hugging Face's Trainer groups it (Note [Weight decay groups] in
// models/weight_decay.hpp): the decayed parameters of GPT-2, Llama, Qwen2, BERT and DistilBERT, with and without a
// LoRA adapter, equal transformers' Trainer.get_decay_parameter_names, and one AdamW step equals torch.optim.AdamW
// over the Trainer's two groups (golden/weight_decay.json, golden/adamw_step.safetensors, written by
// golden/make_weight_decay_goldens.py).
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "hpctrain/models/llama.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/optim/adamw.hpp"

using namespace hpctrain;

namespace {

namespace fs = std::filesystem;

const fs::path kDecayGoldens = fs::path(HPCTRAIN_TEST_DATA_DIR) / "optim/golden";
const fs::path kModelFolders = fs::path(HPCTRAIN_TEST_DATA_DIR) / "models/golden";

nlohmann::json decay_goldens() {
  std::ifstream in(kDecayGoldens / "weight_decay.json");
  return nlohmann::json::parse(in);
}

// The trainable parameters and, of them, those weight_decay_groups puts in the "decay" group.
struct Split {
  std::set<std::string> trainable, decayed;
};

Split hpctrain_split(models::Model& model) {
  optim::NamedParameters trainable;
  for (const auto& item : model.named_parameters())
    if (item.value().requires_grad()) trainable.emplace_back(item.key(), item.value());
  Split split;
  for (const auto& [name, tensor] : trainable) split.trainable.insert(name);
  for (const optim::ParameterGroup& group :
       optim::weight_decay_groups(trainable, 0.1, models::no_weight_decay_parameters(model)))
    if (group.name == "decay")
      for (const auto& [name, tensor] : group.parameters) split.decayed.insert(name);
  return split;
}

std::set<std::string> as_set(const nlohmann::json& names) { return names.get<std::set<std::string>>(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(weight_decay)

BOOST_AUTO_TEST_CASE(decayed_parameters_equal_transformers_trainer) {
  const nlohmann::json cases = decay_goldens().at("cases");
  BOOST_TEST(cases.size() == 10u);
  for (const auto& [name, golden] : cases.items()) {
    BOOST_TEST_CONTEXT(name) {
      const auto loaded = models::load_pretrained(kModelFolders / golden.at("folder").get<std::string>());
      if (golden.contains("lora_r")) {
        models::LoraConfig lora;
        lora.r = golden.at("lora_r").get<int64_t>();
        lora.alpha = golden.at("lora_alpha").get<double>();
        lora.modules_to_save = models::default_modules_to_save(models::lora_task_type(*loaded.model));  // peft's
        (void)models::apply_lora(*loaded.model, lora);  // the model type's default targets
      }
      const Split split = hpctrain_split(*loaded.model);
      BOOST_TEST(split.trainable == as_set(golden.at("trainable")));
      BOOST_TEST(split.decayed == as_set(golden.at("decayed")));
    }
  }
}

BOOST_AUTO_TEST_CASE(norm_modules_and_biases_are_found_by_type) {
  // A name that says nothing: the module's type decides.
  struct Net : torch::nn::Module {
    Net() {
      register_module("scale", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
      register_module("proj", torch::nn::Linear(4, 4));
      register_module("rms", std::make_shared<models::LlamaRMSNorm>(4, 1e-6));
    }
  };
  const Net net;
  BOOST_TEST(models::no_weight_decay_parameters(net) ==
             (std::set<std::string>{"proj.bias", "rms.weight", "scale.bias", "scale.weight"}));
}

BOOST_AUTO_TEST_CASE(one_adamw_step_equals_torch_with_trainers_groups) {
  const nlohmann::json step = decay_goldens().at("adamw_step");
  const models::TensorMap expected = models::load_tensor_file(kDecayGoldens / "adamw_step.safetensors");
  for (const char* kind : {"gpt2", "llama"}) {
    BOOST_TEST_CONTEXT(kind) {
      const std::string folder = decay_goldens().at("cases").at(kind).at("folder").get<std::string>();
      const auto loaded = models::load_pretrained(kModelFolders / folder);
      const optim::NamedParameters named = loaded.model->named_parameters().pairs();
      optim::AdamWOptions options;
      options.weight_decay = step.at("weight_decay").get<double>();
      optim::AdamW adamw(named, models::no_weight_decay_parameters(*loaded.model), options);
      {
        const at::NoGradGuard no_grad;
        for (const auto& [name, p] : named) p.mutable_grad() = at::cos(3 * p + 1);
      }
      adamw.step(step.at("lr").get<double>());
      for (const auto& [name, p] : named) {
        const at::Tensor& want = expected.at(std::string(kind) + ".after." + name);
        BOOST_TEST(at::allclose(p.detach(), want, 0, 1e-6),
                   name << ": max difference " << (p.detach() - want).abs().max().item<double>());
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
