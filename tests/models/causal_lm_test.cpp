// Causal LMs (GPT-2, Llama, Qwen2): logits and loss against transformers (golden/causal_lm_reference.py),
// Hugging Face names and the tied head, save -> load identity, strict loading, causality, checkpointing.
#include "fixtures.hpp"
#include "../error_capture.hpp"

#include "hpctrain/compat/torch.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/causal_lm.hpp"
#include "hpctrain/models/checkpointing.hpp"
#include "hpctrain/models/gpt2.hpp"
#include "hpctrain/models/llama.hpp"
#include "hpctrain/models/model_size.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/models/registry.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <map>
#include <string>

namespace hpctrain::models {
namespace {

using hpctrain::testing::contains;
using hpctrain::testing::error_message;
using testing::golden_dir;

// transformers computes in float32 from the same (for bf16: upcast) weights; only summation order differs.
constexpr double kLogitTolerance = 1e-4;
constexpr double kLossRelativeTolerance = 1e-5;

const nlohmann::json& causal_golden() {
  static const nlohmann::json data = testing::read_json(golden_dir() / "causal_lm_golden.json");
  return data;
}

Loaded<CausalLM> load(const std::string& name) {
  Loaded<CausalLM> loaded = causal_lm_from_pretrained(golden_dir() / name);
  loaded.model->eval();
  return loaded;
}

ModelInputs inputs_of(const nlohmann::json& golden_case, bool with_labels) {
  ModelInputs inputs = testing::inputs_of(golden_case);
  if (with_labels) inputs.labels = testing::tensor_from_json(golden_case.at("labels"), at::kLong);
  return inputs;
}

// The logits of the real tokens [N, vocab], row-major, as the golden file stores them.
at::Tensor real_token_logits(const at::Tensor& logits, const ModelInputs& inputs) {
  if (!inputs.attention_mask.defined()) return logits.reshape({-1, logits.size(-1)});
  return logits.index({inputs.attention_mask.to(at::kBool)});
}

BOOST_AUTO_TEST_SUITE(causal_lm_golden)

BOOST_AUTO_TEST_CASE(logits_and_loss_match_transformers) {
  for (const auto& [name, entry] : causal_golden().at("checkpoints").items()) {
    BOOST_TEST_CONTEXT("checkpoint " << name) {
      Loaded<CausalLM> loaded = load(name);
      BOOST_TEST(loaded.report.newly_initialized.empty());
      BOOST_TEST(loaded.report.ignored.empty());
      BOOST_TEST(loaded.report.loaded.size() == loaded.model->named_parameters().size());
      const bool bf16 = name.find("bf16") != std::string::npos;
      BOOST_TEST(loaded.report.converted.size() == (bf16 ? loaded.report.loaded.size() : 0u));
      double worst_logits = 0, worst_loss = 0;
      for (const auto& golden_case : entry.at("cases")) {
        BOOST_TEST_CONTEXT("case " << golden_case.at("name").get<std::string>()) {
          at::NoGradGuard no_grad;
          const ModelInputs inputs = inputs_of(golden_case, true);
          const ModelOutput out = loaded.model->forward(inputs);
          BOOST_TEST(out.logits.sizes() ==
                     at::IntArrayRef({inputs.input_ids.size(0), inputs.input_ids.size(1), loaded.model->vocab_size()}));
          const at::Tensor expected = testing::tensor_from_json(golden_case.at("logits"), at::kFloat);
          const double diff = testing::max_abs_diff(real_token_logits(out.logits, inputs), expected);
          BOOST_TEST(diff < kLogitTolerance);
          const double loss = golden_case.at("loss").get<double>();
          const double loss_diff = std::abs(out.loss.item<double>() - loss) / std::abs(loss);
          BOOST_TEST(loss_diff < kLossRelativeTolerance);
          worst_logits = std::max(worst_logits, diff);
          worst_loss = std::max(worst_loss, loss_diff);
        }
      }
      BOOST_TEST_MESSAGE(name << ": max |logits - transformers| " << worst_logits << ", loss relative difference "
                              << worst_loss);
    }
  }
}

BOOST_AUTO_TEST_CASE(loss_sum_and_count_are_the_shifted_cross_entropy) {
  const Loaded<CausalLM> loaded = load("tiny-llama-gqa-llama3");
  const auto& golden_case = causal_golden().at("checkpoints").at("tiny-llama-gqa-llama3").at("cases").at(1);
  const ModelInputs inputs = inputs_of(golden_case, true);  // right padding: labels -100 under it
  at::NoGradGuard no_grad;
  const at::Tensor logits = loaded.model->forward(inputs).logits;
  const TokenLossSum loss = causal_lm_loss_sum(logits, inputs.labels);
  // Predicted tokens: labels[:, 1:] that are not -100 = real tokens minus each row's first.
  const int64_t real = inputs.attention_mask.sum().item<int64_t>();
  BOOST_TEST(loss.count.item<int64_t>() == real - inputs.input_ids.size(0));
  BOOST_TEST(loss.sum.scalar_type() == at::kFloat);
  const double mean = golden_case.at("loss").get<double>();
  BOOST_TEST(std::abs(loss.sum.item<double>() / static_cast<double>(loss.count.item<int64_t>()) - mean) < 1e-5 * mean);
  // By hand: -log softmax(logits[b, t])[labels[b, t + 1]] summed.
  double by_hand = 0;
  const at::Tensor log_probs = logits.log_softmax(-1);
  for (int64_t b = 0; b < logits.size(0); ++b)
    for (int64_t t = 0; t + 1 < logits.size(1); ++t) {
      const int64_t label = inputs.labels[b][t + 1].item<int64_t>();
      if (label != -100) by_hand -= log_probs[b][t][label].item<double>();
    }
  BOOST_TEST(std::abs(loss.sum.item<double>() - by_hand) < 1e-4);
  const std::string message = error_message([&] { (void)causal_lm_loss_sum(logits, inputs.labels.slice(1, 1)); });
  BOOST_TEST(contains(message, "labels must be [batch, sequence]"));
}

// The model's tensors are the checkpoint's, by name and shape: GPT-2's Conv1D weights [in, out], no lm_head
// when tied (Note [Tied head], Note [Conv1D weights]).
BOOST_AUTO_TEST_CASE(parameter_names_and_shapes_are_the_checkpoints) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-llama-tied", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      const StateDict file = read_weights(golden_dir() / name);
      const Loaded<CausalLM> loaded = load(name);
      const StateDict ours = state_dict(*loaded.model);
      BOOST_TEST(ours.size() == file.size());
      for (const auto& [key, tensor] : file) {
        BOOST_TEST_CONTEXT(key) {
          BOOST_TEST_REQUIRE(ours.count(key) == 1u);
          BOOST_TEST(ours.at(key).sizes() == tensor.sizes());
        }
      }
      BOOST_TEST(loaded.model->tied_head() == (ours.count("lm_head.weight") == 0));
    }
  }
  const Loaded<CausalLM> gpt2 = load("tiny-gpt2-f32");
  BOOST_TEST(state_dict(*gpt2.model).at("transformer.h.0.mlp.c_fc.weight").sizes() == at::IntArrayRef({24, 96}));
  BOOST_TEST(gpt2.model->spec().architecture == "GPT2LMHeadModel");
  BOOST_TEST(load("tiny-qwen2").model->spec().architecture == "Qwen2ForCausalLM");
  BOOST_TEST(load("tiny-llama-tied").model->spec().architecture == "LlamaForCausalLM");
}

BOOST_AUTO_TEST_CASE(parameter_count_matches_the_size_estimate) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-llama-tied", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      const Loaded<CausalLM> loaded = load(name);
      int64_t total = 0;
      for (const auto& item : loaded.model->named_parameters()) total += item.value().numel();
      BOOST_TEST(estimate_model_size(loaded.model->config()).parameters == total);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(causal_lm_behaviour)

// Changing later tokens never changes earlier positions' logits; padding never changes real tokens' logits.
BOOST_AUTO_TEST_CASE(positions_do_not_see_later_tokens_or_padding) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> loaded = load(name);
      at::NoGradGuard no_grad;
      torch::manual_seed(11);
      ModelInputs inputs;
      inputs.input_ids = at::randint(3, 64, {2, 7}, at::kLong);
      const at::Tensor logits = loaded.model->forward(inputs).logits;
      ModelInputs changed = inputs;
      changed.input_ids = inputs.input_ids.clone();
      changed.input_ids.index_put_({at::indexing::Slice(), at::indexing::Slice(4, at::indexing::None)},
                                   at::randint(3, 64, {2, 3}, at::kLong));
      const at::Tensor changed_logits = loaded.model->forward(changed).logits;
      BOOST_TEST(at::equal(changed_logits.slice(1, 0, 4), logits.slice(1, 0, 4)));
      BOOST_TEST(!at::equal(changed_logits.slice(1, 4), logits.slice(1, 4)));
      // Right padding with arbitrary ids under mask 0.
      ModelInputs padded;
      padded.input_ids = at::cat({inputs.input_ids, at::randint(3, 64, {2, 3}, at::kLong)}, 1);
      padded.attention_mask = at::cat({at::ones({2, 7}, at::kLong), at::zeros({2, 3}, at::kLong)}, 1);
      const at::Tensor padded_logits = loaded.model->forward(padded).logits;
      BOOST_TEST(testing::max_abs_diff(padded_logits.slice(1, 0, 7), logits) < 1e-5);
    }
  }
}

// With positions 0..L-1 whatever the mask (transformers' forward without position_ids), Llama's relative
// rotary positions make a left-padded row equal to the row alone.
BOOST_AUTO_TEST_CASE(left_padding_keeps_llama_logits) {
  Loaded<CausalLM> loaded = load("tiny-llama-gqa-llama3");
  at::NoGradGuard no_grad;
  torch::manual_seed(12);
  ModelInputs alone;
  alone.input_ids = at::randint(3, 64, {1, 5}, at::kLong);
  ModelInputs left;
  left.input_ids = at::cat({at::zeros({1, 2}, at::kLong), alone.input_ids}, 1);
  left.attention_mask = at::cat({at::zeros({1, 2}, at::kLong), at::ones({1, 5}, at::kLong)}, 1);
  const at::Tensor expected = loaded.model->forward(alone).logits;
  const at::Tensor got = loaded.model->forward(left).logits.slice(1, 2);
  BOOST_TEST(testing::max_abs_diff(got, expected) < 1e-4);
  BOOST_TEST(at::isfinite(loaded.model->forward(left).logits).all().item<bool>());  // padded rows too
}

// Training's bf16 autocast on the CPU: logits close to float32's (bf16 keeps ~3 significant digits), finite
// gradients for every parameter.
BOOST_AUTO_TEST_CASE(bf16_autocast_stays_close_to_float32) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-llama-gqa-llama3", "tiny-qwen2"}) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> loaded = load(name);
      const auto& golden_case = causal_golden().at("checkpoints").at(name).at("cases").at(2);  // left padding
      const ModelInputs inputs = inputs_of(golden_case, true);
      at::Tensor expected;
      {
        at::NoGradGuard no_grad;
        expected = loaded.model->forward(inputs).logits;
      }
      ModelOutput out;
      {
        const compat::AutocastScope bf16(at::kCPU, /*enabled=*/true, at::kBFloat16);
        out = loaded.model->forward(inputs);
      }
      BOOST_TEST(out.logits.scalar_type() == at::kBFloat16);
      const at::Tensor real = inputs.attention_mask.to(at::kBool);
      const double scale = expected.index({real}).abs().max().item<double>();
      BOOST_TEST(testing::max_abs_diff(out.logits.index({real}), expected.index({real})) < 0.05 * scale);
      out.loss.backward();
      for (const auto& item : loaded.model->named_parameters()) {
        BOOST_TEST_CONTEXT(item.key()) { BOOST_TEST(at::isfinite(item.value().grad()).all().item<bool>()); }
      }
    }
  }
}

// Gradient checkpointing recomputes each layer: the same gradients, dropout included, with a padding mask and
// without one (packed rows: the layers get an undefined mask).
BOOST_AUTO_TEST_CASE(gradient_checkpointing_gives_the_same_gradients) {
  for (const std::string name : {"tiny-gpt2-f32", "tiny-qwen2"}) {
    for (const bool masked : {true, false}) {
      BOOST_TEST_CONTEXT(name << (masked ? " with a padding mask" : " without a mask")) {
        Loaded<CausalLM> loaded = load(name);
        loaded.model->train();
        const auto& golden_case = causal_golden().at("checkpoints").at(name).at("cases").at(2);  // left padding
        ModelInputs inputs = inputs_of(golden_case, true);
        if (!masked) inputs.attention_mask = at::Tensor();
        std::map<std::string, at::Tensor> plain;
        for (const bool checkpointed : {false, true}) {
          set_gradient_checkpointing(*loaded.model, checkpointed);
          loaded.model->zero_grad();
          torch::manual_seed(5);
          loaded.model->forward(inputs).loss.backward();
          for (const auto& item : loaded.model->named_parameters()) {
            BOOST_TEST_REQUIRE(item.value().grad().defined());
            if (!checkpointed)
              plain[item.key()] = item.value().grad().clone();
            else
              BOOST_TEST(testing::max_abs_diff(item.value().grad(), plain.at(item.key())) < 1e-6);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(causal_lm_folders)

// save_pretrained -> causal_lm_from_pretrained gives the same model; a tied head is saved as transformers
// saves it (no lm_head.weight). With HPCTRAIN_SAVE_CAUSAL_LM_TO=<dir>, the folders are also written there for
// `causal_lm_reference.py --check <dir>` (AutoModelForCausalLM.from_pretrained on what hpctrain saved).
BOOST_AUTO_TEST_CASE(save_then_load_is_the_identity) {
  const testing::ScratchDir scratch("causal-save");
  const char* keep = std::getenv("HPCTRAIN_SAVE_CAUSAL_LM_TO");
  for (const auto& [name, entry] : causal_golden().at("checkpoints").items()) {
    BOOST_TEST_CONTEXT(name) {
      Loaded<CausalLM> original = load(name);
      const std::filesystem::path out = scratch.path() / name;
      save_pretrained(*original.model, out);
      if (keep != nullptr) save_pretrained(*original.model, std::filesystem::path(keep) / name);
      Loaded<CausalLM> again = load(out.string());
      BOOST_TEST(again.report.ignored.empty());
      BOOST_TEST(again.report.newly_initialized.empty());
      const StateDict saved = read_weights(out);
      BOOST_TEST(saved.size() == read_weights(golden_dir() / name).size());
      BOOST_TEST(saved.count("lm_head.weight") == (original.model->tied_head() ? 0u : 1u));
      const nlohmann::json config = testing::read_json(out / "config.json");
      BOOST_TEST(config.at("architectures").at(0).get<std::string>() == original.model->spec().architecture);
      at::NoGradGuard no_grad;
      const ModelInputs inputs = inputs_of(entry.at("cases").at(2), false);
      BOOST_TEST(at::equal(again.model->forward(inputs).logits, original.model->forward(inputs).logits));
    }
  }
}

// transformers' _init_weights: normal(0, initializer_range), GPT-2's residual projections scaled by
// 1/sqrt(2 n_layer), zero biases, norms 1.
BOOST_AUTO_TEST_CASE(from_config_initializes_like_transformers) {
  torch::manual_seed(1);
  nlohmann::json gpt2_config = testing::read_json(golden_dir() / "tiny-gpt2-f32" / "config.json");
  gpt2_config["n_embd"] = 64;
  gpt2_config["n_layer"] = 8;
  const auto gpt2 = causal_lm_from_config(io::HfConfig::from_json(gpt2_config));
  const StateDict p = state_dict(*gpt2);
  const auto std_of = [&](const StateDict& params, const std::string& name) {
    return params.at(name).std().item<double>();
  };
  BOOST_TEST(std::abs(std_of(p, "transformer.h.0.attn.c_attn.weight") - 0.02) < 0.001);
  BOOST_TEST(std::abs(std_of(p, "transformer.h.3.mlp.c_proj.weight") - 0.005) < 0.0003);  // 0.02 / sqrt(16)
  BOOST_TEST(p.at("transformer.h.0.attn.c_attn.bias").abs().max().item<double>() == 0.0);
  BOOST_TEST(at::equal(p.at("transformer.ln_f.weight"), at::ones({64})));
  const auto llama = causal_lm_from_config(io::HfConfig::load(golden_dir() / "tiny-llama-gqa-llama3"));
  const StateDict l = state_dict(*llama);
  BOOST_TEST(std::abs(std_of(l, "model.embed_tokens.weight") - 0.02) < 0.002);
  BOOST_TEST(at::equal(l.at("model.layers.1.post_attention_layernorm.weight"), at::ones({32})));
}

BOOST_AUTO_TEST_CASE(the_registry_builds_causal_lms_and_keeps_kinds_apart) {
  const io::HfConfig gpt2 = io::HfConfig::load(golden_dir() / "tiny-gpt2-f32");
  BOOST_TEST((model_kind("gpt2") == ModelKind::causal_lm));
  BOOST_TEST((model_kind("bert") == ModelKind::sequence_classifier));
  BOOST_TEST(dynamic_cast<GPT2LMHeadModel*>(build_model(gpt2).get()) != nullptr);
  const std::string message = error_message([&] { (void)from_config(gpt2); });
  BOOST_TEST(contains(message, "model_type \"gpt2\" builds a causal language model"));
  BOOST_TEST(contains(message, "a sequence classifier is needed"));
  const io::HfConfig bert = io::HfConfig::load(golden_dir() / "tiny-bert-f32");
  BOOST_TEST(contains(error_message([&] { (void)causal_lm_from_config(bert); }), "builds a sequence classifier"));
  BOOST_TEST(contains(error_message([&] { (void)from_pretrained(golden_dir() / "tiny-qwen2"); }), "qwen2"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(causal_lm_strict_loading)

BOOST_AUTO_TEST_CASE(missing_unexpected_and_wrong_shaped_tensors_are_named) {
  StateDict weights = read_weights(golden_dir() / "tiny-llama-gqa-llama3");
  weights.erase("model.layers.1.mlp.down_proj.weight");
  weights.emplace("model.layers.0.self_attn.q_proj.bias", at::zeros({32}));
  weights["model.layers.0.self_attn.k_proj.weight"] = at::zeros({32, 32});  // as if without GQA
  const auto model = causal_lm_from_config(io::HfConfig::load(golden_dir() / "tiny-llama-gqa-llama3"));
  const std::string message = error_message([&] { (void)load_state_dict(*model, weights, "tiny-llama"); });
  BOOST_TEST_MESSAGE(message);
  BOOST_TEST(contains(message, "LlamaForCausalLM"));
  BOOST_TEST(contains(message, "1 missing, 1 unexpected, 1 wrong-shaped"));
  BOOST_TEST(contains(message, "missing: model.layers.1.mlp.down_proj.weight"));
  BOOST_TEST(contains(message, "unexpected: model.layers.0.self_attn.q_proj.bias"));
  BOOST_TEST(contains(message, "model.layers.0.self_attn.k_proj.weight [16, 32] vs [32, 32]"));
}

BOOST_AUTO_TEST_CASE(gpt2_conv1d_weights_are_not_linear_weights) {
  StateDict weights = read_weights(golden_dir() / "tiny-gpt2-f32");
  weights["transformer.h.0.mlp.c_fc.weight"] = weights["transformer.h.0.mlp.c_fc.weight"].t().contiguous();
  const auto model = causal_lm_from_config(io::HfConfig::load(golden_dir() / "tiny-gpt2-f32"));
  const std::string message = error_message([&] { (void)load_state_dict(*model, weights, "tiny-gpt2"); });
  BOOST_TEST(contains(message, "transformer.h.0.mlp.c_fc.weight [24, 96] vs [96, 24]"));
}

// Note [Tied head]: a stored lm_head.weight of a tied model is ignored; old GPT-2 exports' attn.bias buffers
// too; a bare GPT2Model (no "transformer." prefix) gets the prefix.
BOOST_AUTO_TEST_CASE(tied_head_legacy_buffers_and_bare_base_models) {
  StateDict weights = read_weights(golden_dir() / "tiny-gpt2-f32");
  StateDict bare;
  for (const auto& [name, tensor] : weights) bare.emplace(name.substr(std::string("transformer.").size()), tensor);
  bare.emplace("h.0.attn.bias", at::ones({1, 1, 32, 32}).tril());
  bare.emplace("lm_head.weight", weights.at("transformer.wte.weight").clone());
  const auto model = causal_lm_from_config(io::HfConfig::load(golden_dir() / "tiny-gpt2-f32"));
  const LoadReport report = load_state_dict(*model, bare, "bare GPT2Model");
  BOOST_TEST(report.added_base_prefix);
  BOOST_TEST(report.loaded.size() == weights.size());
  const std::vector<std::string> ignored{"h.0.attn.bias", "lm_head.weight"};
  BOOST_TEST(report.ignored == ignored, boost::test_tools::per_element());
  // An untied Llama checkpoint without lm_head (a bare LlamaModel's tensors): lm_head newly initialized.
  StateDict base = read_weights(golden_dir() / "tiny-llama-gqa-llama3");
  base.erase("lm_head.weight");
  const auto llama = causal_lm_from_config(io::HfConfig::load(golden_dir() / "tiny-llama-gqa-llama3"));
  const LoadReport llama_report = load_state_dict(*llama, base, "LlamaModel");
  const std::vector<std::string> newly{"lm_head.weight"};
  BOOST_TEST(llama_report.newly_initialized == newly, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
}  // namespace hpctrain::models
