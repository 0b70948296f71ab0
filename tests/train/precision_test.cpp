// Mixed precision: the dynamic loss scaler's rules, the fp16-on-CPU error, the CPU flag parsing, and a
// bf16 autocast step of a DistilBERT model whose matrix products are observed (RecordFunction) in bf16
// while LayerNorm, softmax and the master weights, gradients and optimizer state stay float32.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/utils.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "../error_capture.hpp"
#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/registry.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/optim/adamw.hpp"
#include "hpctrain/train/evaluation.hpp"
#include "hpctrain/train/precision.hpp"
#include "models/layers.hpp"

using namespace hpctrain;
using namespace hpctrain::train;

namespace {

using hpctrain::testing::error_message;

// Dtypes of the first tensor argument (inputs) and of the results (outputs) of each op the forward calls,
// by op name (RecordFunction). An op autocast casts is recorded with its fp32 arguments, before the cast,
// so the products are judged by their results: a product's result has the dtype it was computed in.
std::mutex seen_mutex;
std::map<std::string, std::set<std::string>> seen_inputs, seen_outputs;

template <typename IValues>  // ArrayRef (inputs) or vector (outputs)
void note_first_tensor(std::map<std::string, std::set<std::string>>& into, const char* name, const IValues& values) {
  for (const c10::IValue& value : values) {
    if (!value.isTensor() || !value.toTensor().defined()) continue;
    std::lock_guard<std::mutex> lock(seen_mutex);
    into[name].insert(std::string(c10::toString(value.toTensor().scalar_type())));
    return;
  }
}

std::unique_ptr<at::ObserverContext> record_inputs(const at::RecordFunction& fn) {
  note_first_tensor(seen_inputs, fn.name(), fn.inputs());
  return nullptr;
}
void record_outputs(const at::RecordFunction& fn, at::ObserverContext*) {
  note_first_tensor(seen_outputs, fn.name(), fn.outputs());
}

// The result dtypes of aten::addmm while `work` runs (RecordFunction on this thread).
template <typename Work>
std::set<std::string> addmm_results(Work&& work) {
  seen_inputs.clear(), seen_outputs.clear();
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(record_inputs, record_outputs).needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION}));
  work();
  at::removeCallback(handle);
  return seen_outputs["aten::addmm"];
}

std::shared_ptr<models::SequenceClassifier> tiny_distilbert() {
  const nlohmann::json config = {{"model_type", "distilbert"}, {"vocab_size", 50}, {"dim", 32}, {"n_layers", 2},
                                 {"n_heads", 2}, {"hidden_dim", 64}, {"max_position_embeddings", 16},
                                 {"dropout", 0.1}, {"attention_dropout", 0.1}, {"num_labels", 3}};
  return models::from_config(io::HfConfig::from_json(config));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(precision)

BOOST_AUTO_TEST_CASE(the_scaler_starts_at_2_16_halves_on_overflow_and_doubles_after_2000_clean_steps) {
  DynamicLossScaler scaler;
  BOOST_TEST(scaler.scale() == 65536.0);
  scaler.update(true);
  BOOST_TEST(scaler.scale() == 32768.0);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  BOOST_TEST(scaler.scale() == 32768.0);
  BOOST_TEST(scaler.state().growth_tracker == 1999);
  scaler.update(false);  // the 2000th clean step in a row
  BOOST_TEST(scaler.scale() == 65536.0);
  BOOST_TEST(scaler.state().growth_tracker == 0);
  for (int i = 0; i < 1500; ++i) scaler.update(false);
  scaler.update(true);  // an overflow resets the run of clean steps
  BOOST_TEST(scaler.scale() == 32768.0);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  BOOST_TEST(scaler.scale() == 32768.0);
}

BOOST_AUTO_TEST_CASE(the_scaler_state_round_trips_and_bad_state_is_named) {
  DynamicLossScaler scaler(DynamicLossScaler::Options{1024.0, 2.0, 0.5, 3});
  scaler.update(false);
  DynamicLossScaler restored(DynamicLossScaler::Options{1024.0, 2.0, 0.5, 3});
  restored.load_json(scaler.to_json(), "scaler.json");
  BOOST_TEST(restored.scale() == 1024.0);
  BOOST_TEST(restored.state().growth_tracker == 1);
  restored.update(false), restored.update(false);
  BOOST_TEST(restored.scale() == 2048.0);
  BOOST_TEST(error_message([&] { restored.load_json({{"scale", -1.0}, {"growth_tracker", 0}}, "ck/scaler.json"); })
                 .find("ck/scaler.json: scale -1") != std::string::npos);
  BOOST_TEST(error_message([&] { restored.load_json({{"scale", 8.0}, {"growth_tracker", 3}}, "s"); }).find("growth_tracker 3") !=
             std::string::npos);
  BOOST_TEST(error_message([&] { restored.load_json({{"scale", 8.0}}, "s"); }).find("expected") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(fp16_without_cuda_is_an_error_naming_the_option) {
  const std::string message = error_message([] { PrecisionPolicy(MixedPrecision::fp16, LossScaling::automatic, GradReduceDtype::fp32, c10::DeviceType::CPU); });
  BOOST_TEST(message.find("--mixed-precision fp16 needs --device cuda") != std::string::npos, message);
  auto comm = dist::make_single_process_comm();
  AcceleratorOptions options;
  options.device = "cpu", options.threads = 1, options.mixed_precision = MixedPrecision::fp16;
  BOOST_TEST(error_message([&] { Accelerator acc(*comm, options); }).find("--mixed-precision") != std::string::npos);
  BOOST_TEST(PrecisionPolicy(MixedPrecision::fp16, LossScaling::automatic, GradReduceDtype::fp32, c10::DeviceType::CUDA).scaler() != nullptr);
  BOOST_TEST(PrecisionPolicy(MixedPrecision::bf16, LossScaling::automatic, GradReduceDtype::fp32, c10::DeviceType::CPU).scaler() == nullptr);
  BOOST_TEST(PrecisionPolicy(MixedPrecision::no, LossScaling::dynamic, GradReduceDtype::fp32, c10::DeviceType::CPU).scaler() != nullptr);
  BOOST_TEST(error_message([] { (void)parse_mixed_precision("fp8"); }) == "--mixed-precision 'fp8': expected no, bf16 or fp16");
}

BOOST_AUTO_TEST_CASE(bf16_flags_are_read_from_the_cpuinfo_flags) {
  BOOST_TEST(bf16_flags_of("flags : fpu avx2 avx512f avx512_bf16 amx_tile amx_bf16 amx_int8") == "avx512_bf16 amx_bf16");
  BOOST_TEST(bf16_flags_of("flags : fpu avx2 avx512f avx512bw") == "");
}

BOOST_AUTO_TEST_CASE(layer_norm_of_bf16_activations_runs_in_fp32_under_autocast) {
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({8}));
  torch::manual_seed(2);
  const at::Tensor x = (at::randn({3, 8}) * 40 + 100).to(at::kBFloat16);
  const compat::AutocastScope region(c10::DeviceType::CPU, true);
  // A plain norm->forward(x) throws in LibTorch 1.13 (bf16 input, fp32 weight: autocast leaves layer_norm alone).
  const at::Tensor y = models::detail::norm_in_fp32(norm, x);
  BOOST_TEST(y.scalar_type() == at::kFloat);
  BOOST_TEST(at::allclose(y, at::layer_norm(x.to(at::kFloat), {8}), 1e-5, 1e-5));
  BOOST_TEST(compat::AutocastScope::is_enabled(c10::DeviceType::CPU));  // the fp32 island ended
}

BOOST_AUTO_TEST_CASE(bf16_autocast_runs_the_products_in_bf16_and_keeps_fp32_master_weights) {
  auto comm = dist::make_single_process_comm();
  AcceleratorOptions options;
  options.device = "cpu", options.threads = 1, options.mixed_precision = MixedPrecision::bf16;
  Accelerator acc(*comm, options);
  torch::manual_seed(5);
  auto model = tiny_distilbert();
  acc.prepare_model(*model);
  optim::AdamW optimizer(model->named_parameters().pairs(), models::no_weight_decay_parameters(*model), {});
  acc.register_optimizer(optimizer);
  model->train();
  models::ModelInputs inputs;
  inputs.input_ids = at::randint(50, {4, 12}, at::kLong);
  inputs.attention_mask = at::ones({4, 12}, at::kLong);
  inputs.attention_mask.narrow(1, 9, 3).zero_();  // padding: the masked softmax path
  seen_inputs.clear(), seen_outputs.clear();
  at::Tensor logits;
  {
    const auto handle = at::addThreadLocalCallback(
        at::RecordFunctionCallback(record_inputs, record_outputs).needsInputs(true).needsOutputs(true).scopes({at::RecordScope::FUNCTION}));
    const AutocastRegion region = acc.autocast();
    logits = model->forward(inputs).logits;
    at::removeCallback(handle);
  }
  // Every matrix product the forward ran (Linear layers: addmm, matmul -> mm; BlockedAttention: baddbmm and
  // bmm) gave a bf16 result; LayerNorm and BlockedAttention's softmax ran in float32.
  for (const char* product : {"aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::matmul"}) {
    BOOST_TEST(seen_outputs.count(product) == 1u, product);
    BOOST_TEST((seen_outputs[product] == std::set<std::string>{"BFloat16"}), product);
  }
  for (const auto& [name, dtypes] : seen_outputs)
    BOOST_TEST_MESSAGE(name << " -> " << fmt::format("{}", fmt::join(dtypes, " ")));
  BOOST_TEST((seen_inputs["aten::layer_norm"] == std::set<std::string>{"Float"}));
  BOOST_TEST((seen_outputs["aten::layer_norm"] == std::set<std::string>{"Float"}));  // not cast down by autocast
  BOOST_TEST((seen_inputs["aten::_softmax"] == std::set<std::string>{"Float"}));
  const at::Tensor loss = at::cross_entropy_loss(logits.to(at::kFloat), at::randint(3, {4}, at::kLong));
  acc.backward(loss);
  BOOST_TEST(std::isfinite(acc.clip_grad_norm(1.0)));
  optimizer.step(1e-3);
  for (const auto& item : model->named_parameters()) {
    BOOST_TEST(item.value().scalar_type() == at::kFloat, item.key());
    BOOST_TEST(item.value().grad().scalar_type() == at::kFloat, item.key());
  }
  for (const auto& [name, state] : optimizer.state_dict())
    BOOST_TEST((name == "step" || state.scalar_type() == at::kFloat), name);
  BOOST_TEST(!compat::AutocastScope::is_enabled(c10::DeviceType::CPU));  // the region ended
}

// Training under --mixed-precision evaluates under it too (the trainer passes the policy's dtype): the
// products run in bf16, the metrics stay close to the float32 evaluation's and are computed in float32.
BOOST_AUTO_TEST_CASE(evaluation_under_bf16_autocast_runs_the_products_in_bf16) {
  trainer_test::Scratch scratch("eval-autocast");
  const auto data_file = trainer_test::write_tiny_dataset(scratch / "data.h5");
  auto comm = dist::make_single_process_comm();
  torch::manual_seed(3);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(trainer_test::write_tiny_config(scratch / "config.json")));
  config["num_labels"] = trainer_test::kLabels;
  auto model = models::from_config(io::HfConfig::from_json(config));
  loader::LoaderOptions options;
  options.split = "validation", options.batch_size = 4, options.shuffle = data::ShuffleMode::none;
  loader::ShardLoader loader(data_file, options);
  std::optional<EvaluationResult> fp32, bf16;
  const auto in_fp32 = addmm_results([&] { fp32 = evaluate(*model, loader, *comm, at::kCPU); });
  BOOST_TEST((in_fp32 == std::set<std::string>{"Float"}));
  const auto in_bf16 = addmm_results([&] { bf16 = evaluate(*model, loader, *comm, at::kCPU, NonFinite::fail, at::kBFloat16); });
  BOOST_TEST((in_bf16 == std::set<std::string>{"BFloat16"}));
  BOOST_TEST(bf16->metrics.examples == fp32->metrics.examples);
  BOOST_TEST(std::abs(bf16->metrics.loss - fp32->metrics.loss) < 0.05);
  BOOST_TEST(!compat::AutocastScope::is_enabled(c10::DeviceType::CPU));  // the region ended with each forward
}

BOOST_AUTO_TEST_SUITE_END()
