// QLoRA (Note [Quantized base]): the 4-bit product and its input gradient, no full-precision weight kept between
// forward and backward, which layers a LoRA model quantizes (GPT-2's Conv1D transposed as transformers does), the
// logits and adapter gradients of a quantized model against the same model with the dequantized weights in
// full precision, bf16 autocast, merging, and the refusals.
#include "fixtures.hpp"

#include "counting_allocator.hpp"
#include "hpctrain/compat/autocast_state.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/gpt2.hpp"
#include "hpctrain/models/lora.hpp"
#include "hpctrain/models/qlora.hpp"
#include "hpctrain/models/quantized_embedding.hpp"
#include "hpctrain/models/quantized_linear.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weights.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <boost/test/unit_test.hpp>
#include <torch/utils.h>

namespace hpctrain::models {
namespace {

std::shared_ptr<Model> qlora_llama() {
  return build_model(io::HfConfig::from_json({{"model_type", "llama"}, {"vocab_size", 100}, {"hidden_size", 64},
                                              {"intermediate_size", 128}, {"num_hidden_layers", 2},
                                              {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                              {"max_position_embeddings", 64}, {"tie_word_embeddings", false}}));
}

std::shared_ptr<Model> qlora_gpt2() {
  return build_model(io::HfConfig::from_json({{"model_type", "gpt2"}, {"vocab_size", 100}, {"n_embd", 64},
                                              {"n_layer", 2}, {"n_head", 2}, {"n_positions", 32}, {"resid_pdrop", 0.0},
                                              {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}}));
}

std::shared_ptr<Model> qlora_bert() {
  return testing::build({{"model_type", "bert"}, {"vocab_size", 100}, {"hidden_size", 64}, {"num_hidden_layers", 2},
                         {"num_attention_heads", 4}, {"intermediate_size", 128}, {"max_position_embeddings", 64},
                         {"num_labels", 3}, {"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}});
}

ModelInputs qlora_batch(bool classifier) {
  ModelInputs inputs;
  inputs.input_ids = at::randint(4, 100, {2, 12}, at::kLong);
  inputs.labels = classifier ? at::randint(0, 3, {2}, at::kLong) : inputs.input_ids;
  return inputs;
}

// LoRA on all-linear with random lora_B, PEFT's modules to save for the task.
void attach_adapters(Model& model) {
  LoraConfig config;
  config.r = 4, config.alpha = 8;
  config.target_modules = {"all-linear"};
  config.modules_to_save = default_modules_to_save(lora_task_type(model));
  (void)apply_lora(model, config);
  at::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters())
    if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0.0, 0.1);
}

// The model with each quantizable weight replaced by its dequantized values, in full precision: what a 4-bit base
// computes, as a plain model.
void use_dequantized_weights(Model& model, const Quant4Options& options) {
  at::NoGradGuard no_grad;
  for (const auto& [name, layer] : quantizable_layers(model, options.embeddings)) {
    at::Tensor& w = layer->base_weight();
    const at::Tensor out_in = layer->fan_in_fan_out() ? w.t() : w;
    const at::Tensor dq = dequantize_4bit(quantize_4bit(out_in, options), at::kFloat);
    w.copy_(layer->fan_in_fan_out() ? dq.t() : dq);
  }
  if (options.embeddings) {
    at::Tensor& w = model.input_embeddings()->weight;
    w.copy_(dequantize_4bit(quantize_4bit(w, options), at::kFloat));
  }
}

std::map<std::string, at::Tensor> adapter_gradients(Model& model, const ModelInputs& inputs) {
  for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
  model.forward(inputs).loss.backward();
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters())
    if (item.value().grad().defined()) out.emplace(item.key(), item.value().grad().clone());
  return out;
}

double relative_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-12, b.abs().max().item<double>());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(qlora)

// y = x Wᵀ + b with W dequantized; grad_x = grad_y W: the plain ops on the dequantized weight, bit for bit where the
// product dequantizes the weight whole (bfloat16, or no AVX-512), up to the order of the float32 sums where it is
// fused (Note [Fused 4-bit product]; the next case covers its shapes).
BOOST_AUTO_TEST_CASE(product_and_input_gradient_equal_the_dequantized_linear) {
  torch::manual_seed(3);
  const Quant4Weight w = quantize_4bit(at::randn({48, 96}) * 0.1, Quant4Options{});
  const at::Tensor dq = dequantize_4bit(w, at::kFloat);
  const at::Tensor bias = at::randn({48});
  const at::Tensor x = at::randn({2, 5, 96}).set_requires_grad(true);
  const at::Tensor reference_x = x.detach().clone().set_requires_grad(true);
  const at::Tensor y = quantized_linear(x, w, bias);
  const at::Tensor reference = at::linear(reference_x, dq, bias);
  const bool fused = quant4_product_fused(x.device(), at::kFloat);
  BOOST_TEST_MESSAGE("float32 product fused: " << fused);
  BOOST_TEST((fused ? at::allclose(y, reference, 1e-5, 1e-6) : at::equal(y, reference)));
  const at::Tensor grad = at::randn_like(y);
  y.backward(grad);
  reference.backward(grad);
  BOOST_TEST(at::allclose(x.grad(), reference_x.grad(), 1e-5, 1e-6));
  if (!fused) BOOST_TEST(at::equal(x.grad(), at::matmul(grad, dq)));
}

// The fused float32 product (Note [Fused 4-bit product]) against float64 products over the dequantized weight, for
// the shapes its tiling splits differently: token counts around the 12-row tile and past the 256-token pass, output
// and input features off the 32-column tile, the 96-row strip, the 128-column panel and the 256-deep slice, an odd
// element count, blocks shorter than a row and a block spanning rows, NF4 and FP4, with and without the nested
// absmax, on one and two threads.
BOOST_AUTO_TEST_CASE(fused_product_equals_float64_over_the_dequantized_weight) {
  if (!quant4_product_fused(c10::Device(c10::kCPU), at::kFloat)) {
    BOOST_TEST_MESSAGE("no AVX-512 here: the float32 product is not fused, the case above covers it");
    return;
  }
  torch::manual_seed(12);
  const int threads = at::get_num_threads();
  struct Shape {
    int64_t tokens, out, in, blocksize;
    Quant4Type type;
    bool nested;
    int threads;
  };
  const std::vector<Shape> shapes = {
      {1, 1, 7, 32, Quant4Type::nf4, true, 1},     {11, 31, 64, 64, Quant4Type::nf4, true, 1},
      {12, 97, 257, 64, Quant4Type::fp4, false, 1}, {13, 130, 300, 4096, Quant4Type::nf4, true, 2},
      {300, 200, 129, 32, Quant4Type::nf4, false, 2}, {37, 33, 520, 256, Quant4Type::fp4, true, 1},
      {257, 96, 96, 64, Quant4Type::nf4, true, 2}, {40, 70, 160, 32, Quant4Type::fp4, true, 2}};
  for (const Shape& s : shapes) {
    at::set_num_threads(s.threads);
    const Quant4Weight w = quantize_4bit(at::randn({s.out, s.in}), Quant4Options{s.type, s.blocksize, s.nested});
    const at::Tensor dq = dequantize_4bit(w, at::kFloat).to(at::kDouble);
    const at::Tensor x = at::randn({s.tokens, s.in}).set_requires_grad(true);
    const at::Tensor y = quantized_linear(x, w, at::Tensor());
    const at::Tensor grad = at::randn({s.tokens, s.out});
    y.backward(grad);
    const at::Tensor y_reference = at::linear(x.detach().to(at::kDouble), dq);
    const at::Tensor dx_reference = at::matmul(grad.to(at::kDouble), dq);
    const std::string shape = "tokens " + std::to_string(s.tokens) + " out " + std::to_string(s.out) + " in " +
                              std::to_string(s.in) + " block " + std::to_string(s.blocksize);
    BOOST_TEST(y.sizes() == y_reference.sizes(), shape);
    BOOST_TEST(relative_difference(y.to(at::kDouble), y_reference) < 1e-5, shape);
    BOOST_TEST(relative_difference(x.grad().to(at::kDouble), dx_reference) < 1e-5, shape);
  }
  at::set_num_threads(threads);
}

// Between forward and backward only the output, the graph's small tensors and one reused dequantization buffer stay
// allocated (Note [Dequantization buffer]; a fused product allocates none, Note [Fused 4-bit product]): two 4 MiB
// layers leave at most one weight's bytes, not two (fused: the step never reaches one).
BOOST_AUTO_TEST_CASE(no_full_precision_weight_lives_between_forward_and_backward) {
  torch::manual_seed(4);
  const Quant4Weight first = quantize_4bit(at::randn({1024, 1024}), Quant4Options{});
  const Quant4Weight second = quantize_4bit(at::randn({1024, 1024}), Quant4Options{});
  const at::Tensor x = at::randn({2, 1024}).set_requires_grad(true);
  at::Tensor y;
  size_t live_after_forward = 0, peak = 0;
  {
    testing::CountingScope scope;
    y = quantized_linear(quantized_linear(x, first, at::Tensor()), second, at::Tensor());
    live_after_forward = scope.live();
    peak = scope.peak();
  }
  const size_t weight_bytes = 4u * 1024 * 1024;
  BOOST_TEST(peak < weight_bytes + 256u * 1024);              // the second layer reused the first one's buffer
  BOOST_TEST(live_after_forward < weight_bytes + 64u * 1024);  // the outputs' 16 KiB and bookkeeping, at most one buffer
  if (quant4_product_fused(x.device(), at::kFloat))  // no weight-sized buffer at all: the absmax and x transposed
    BOOST_TEST(peak < 512u * 1024);
  y.sum().backward();
  const at::Tensor reference = x.detach().clone().set_requires_grad(true);
  at::linear(at::linear(reference, dequantize_4bit(first, at::kFloat)), dequantize_4bit(second, at::kFloat)).sum().backward();
  BOOST_TEST(relative_difference(x.grad(), reference.grad()) < 1e-5);  // each layer's product read its own weight
}

// Every frozen LoRA layer is quantized, the modules to save, embeddings, norms and head are not; GPT-2's Conv1D
// weight is quantized as its transpose ([out, in], transformers' Bnb4bitQuantize), so its codes are bitsandbytes'.
BOOST_AUTO_TEST_CASE(which_layers_are_quantized) {
  torch::manual_seed(5);
  auto bert = qlora_bert();
  attach_adapters(*bert);
  const QuantizedBase done = quantize_frozen_base(*bert, Quant4Options{});
  // 2 layers x (query, key, value, attention.output.dense, intermediate.dense, output.dense) + pooler.dense
  BOOST_TEST(done.layers.size() == 13u);
  for (const std::string& name : done.layers) BOOST_TEST(name.find("classifier") == std::string::npos, name);
  BOOST_TEST(quantized_layer_count(*bert) == 13);
  const auto params = bert->named_parameters();
  BOOST_TEST(params["bert.encoder.layer.0.attention.self.query.weight"].numel() == 0);
  BOOST_TEST(params["classifier.weight"].numel() == 3 * 64);  // a module to save: trains in full precision
  BOOST_TEST(params["bert.embeddings.word_embeddings.weight"].numel() == 100 * 64);

  auto gpt2 = qlora_gpt2();
  attach_adapters(*gpt2);
  auto* c_attn = dynamic_cast<Gpt2Conv1D*>(gpt2->named_modules()["transformer.h.0.attn.c_attn"].get());
  BOOST_REQUIRE(c_attn != nullptr);
  const at::Tensor stored = c_attn->weight.detach().clone();  // [in, out]
  (void)quantize_frozen_base(*gpt2, Quant4Options{});
  const Quant4Weight q = c_attn->quantized_base();
  BOOST_TEST((q.shape == std::vector<int64_t>{192, 64}));
  BOOST_TEST(at::equal(q.codes, quantize_4bit(stored.t(), Quant4Options{}).codes));
  BOOST_TEST(c_attn->in_features() == 64);
  BOOST_TEST(c_attn->out_features() == 192);
}

// A quantized model computes what the model with the dequantized weights in full precision computes: logits and
// adapter gradients (Linear and Conv1D, NF4 and FP4), and it holds far fewer bytes.
BOOST_AUTO_TEST_CASE(quantized_model_equals_the_dequantized_model) {
  const Quant4Options with_embeddings{Quant4Type::nf4, 64, true, /*embeddings=*/true};  // Note [Quantized embeddings]
  for (const Quant4Options options : {Quant4Options{}, Quant4Options{Quant4Type::fp4, 64, false}, with_embeddings}) {
    for (int kind = 0; kind < 3; ++kind) {
      torch::manual_seed(6);
      auto make = [&] { return kind == 0 ? qlora_llama() : kind == 1 ? qlora_gpt2() : qlora_bert(); };
      auto quantized = make();
      torch::manual_seed(6);
      auto reference = make();
      torch::manual_seed(7);
      attach_adapters(*quantized);
      torch::manual_seed(7);
      attach_adapters(*reference);
      const int64_t full_bytes = model_bytes(*quantized);
      const QuantizedBase done = quantize_frozen_base(*quantized, options);
      use_dequantized_weights(*reference, options);
      BOOST_TEST(model_bytes(*quantized) < full_bytes / 2, quantized->spec().architecture);
      const bool head_listed = std::find(done.layers.begin(), done.layers.end(), "lm_head") != done.layers.end();
      BOOST_TEST(head_listed == (options.embeddings && kind == 0));  // Llama's untied head; GPT-2's is its wte
      BOOST_TEST(embedding_quantized(*quantized->input_embeddings()) == options.embeddings);
      if (options.embeddings)  // the float32 embedding is gone, its 4-bit form (3.2 KB here) holds it
        BOOST_TEST(quantized->input_embeddings()->weight.numel() == 0);
      torch::manual_seed(8);
      const ModelInputs inputs = qlora_batch(kind == 2);
      quantized->train(), reference->train();
      const auto ours = adapter_gradients(*quantized, inputs), theirs = adapter_gradients(*reference, inputs);
      BOOST_TEST(ours.size() == theirs.size());
      for (const auto& [name, grad] : theirs) BOOST_TEST(relative_difference(ours.at(name), grad) < 1e-5, name);
      at::NoGradGuard no_grad;
      quantized->eval(), reference->eval();
      BOOST_TEST(relative_difference(quantized->forward(inputs).logits, reference->forward(inputs).logits) < 1e-6,
                 quantized->spec().architecture);
    }
  }
}

// Under CPU bf16 autocast the weight is dequantized into bfloat16 (bitsandbytes' compute dtype), the product runs in
// bf16, and the input gradient comes back in the input's float32.
BOOST_AUTO_TEST_CASE(bf16_autocast_dequantizes_into_bf16) {
  torch::manual_seed(9);
  const Quant4Weight w = quantize_4bit(at::randn({32, 64}), Quant4Options{});
  const at::Tensor x = at::randn({4, 64}).set_requires_grad(true);
  at::Tensor y;
  {
    compat::AutocastState on = compat::AutocastState::current();
    on.cpu_enabled = true, on.cpu_dtype = at::kBFloat16;
    const compat::AutocastStateGuard guard(on);  // restored even when the product throws (it leaked into later cases)
    y = quantized_linear(x, w, at::Tensor());
  }
  BOOST_TEST(y.scalar_type() == at::kBFloat16);
  BOOST_TEST(at::equal(y, at::linear(x.detach().to(at::kBFloat16), dequantize_4bit(w, at::kBFloat16))));
  y.sum().backward();
  BOOST_TEST(x.grad().scalar_type() == at::kFloat);
}

// Merging dequantizes (every quantized layer, adapted or not) and adds the delta: a plain float32 model whose
// logits are the quantized model's.
BOOST_AUTO_TEST_CASE(merging_a_quantized_model_gives_a_plain_model) {
  torch::manual_seed(10);
  auto model = qlora_gpt2();
  attach_adapters(*model);
  (void)quantize_frozen_base(*model, Quant4Options{});
  model->eval();
  at::NoGradGuard no_grad;
  const ModelInputs inputs = qlora_batch(false);
  const at::Tensor before = model->forward(inputs).logits;
  dequantize_base(*model);
  merge_lora(*model);
  BOOST_TEST(quantized_layer_count(*model) == 0);
  for (const auto& item : model->named_buffers()) BOOST_TEST(item.key().find("base_4bit") == std::string::npos);
  BOOST_TEST(relative_difference(model->forward(inputs).logits, before) < 1e-5);
}

BOOST_AUTO_TEST_CASE(refusals_name_the_field) {
  auto config = io::HfConfig::from_json({{"model_type", "llama"}, {"vocab_size", 100}, {"hidden_size", 64},
                                         {"intermediate_size", 128}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
                                         {"quantization_config", {{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}}},
                                        "base/config.json");
  BOOST_CHECK_EXCEPTION(check_not_prequantized(config), Error, [](const Error& e) {
    const std::string what = e.what();
    return what.find("'base/config.json': quantization_config (quant_method bitsandbytes)") != std::string::npos;
  });
  auto model = qlora_llama();  // no adapters: every layer frozen, but nothing keeps the layers trainable
  for (auto& p : model->parameters()) p.set_requires_grad(true);
  BOOST_CHECK_THROW((void)quantize_frozen_base(*model, Quant4Options{}), Error);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace hpctrain::models
