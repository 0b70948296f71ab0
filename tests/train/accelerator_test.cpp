// The Accelerator with the single-process communicator: prepare, backward, accumulation, clipping,
// gathering, dropout seeds and save_state/load_state.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/models/weight_decay.hpp"
#include "hpctrain/train/accelerator.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/optim/optimizer.hpp"

using namespace hpctrain;
using namespace hpctrain::train;
using trainer_test::Scratch;
using trainer_test::TinyNet;
namespace fs = std::filesystem;

namespace {

struct Setup {
  std::unique_ptr<dist::Comm> comm = dist::make_single_process_comm();
  std::unique_ptr<Accelerator> acc;
  std::shared_ptr<TinyNet> net;

  explicit Setup(int64_t accumulation = 1) {
    AcceleratorOptions options;
    options.device = "cpu", options.threads = 1, options.gradient_accumulation_steps = accumulation;
    acc = std::make_unique<Accelerator>(*comm, options);
    torch::manual_seed(3);
    net = std::make_shared<TinyNet>();
    acc->prepare_model(*net);
  }
  at::Tensor loss(int64_t seed) {
    torch::manual_seed(seed);
    return net->forward(at::randn({6, 4})).pow(2).mean();
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(accelerator)

BOOST_AUTO_TEST_CASE(backward_gives_the_plain_gradients_and_survives_an_unused_parameter) {
  Setup s;
  BOOST_TEST(s.acc->device().is_cpu());
  BOOST_TEST(s.acc->is_main_process());
  TinyNet plain;
  for (std::size_t i = 0; i < plain.parameters().size(); ++i) {
    at::NoGradGuard no_grad;
    plain.parameters()[i].copy_(s.net->parameters()[i]);
  }
  s.acc->backward(s.loss(11));
  torch::manual_seed(11);
  plain.forward(at::randn({6, 4})).pow(2).mean().backward();
  BOOST_TEST(at::allclose(s.net->first->weight.grad(), plain.first->weight.grad()));
  BOOST_TEST(at::allclose(s.net->second->bias.grad(), plain.second->bias.grad()));
  BOOST_TEST(s.acc->reducer().unused_parameters() == std::vector<std::string>{"unused"});
}

BOOST_AUTO_TEST_CASE(accumulate_syncs_every_n_micro_batches_or_when_told) {
  Setup s(3);
  std::vector<bool> sync;
  for (int i = 0; i < 6; ++i) sync.push_back(s.acc->accumulate());
  BOOST_TEST((sync == std::vector<bool>{false, false, true, false, false, true}));
  BOOST_TEST(!s.acc->accumulate());
  BOOST_TEST(s.acc->accumulate(/*end_of_step=*/true));
  BOOST_TEST(!s.acc->accumulate());  // a new cycle after the forced sync
  // Accumulated micro-batches give the summed gradient.
  s.acc->set_gradient_sync(false);
  s.acc->backward(s.loss(1));
  s.acc->set_gradient_sync(true);
  s.acc->backward(s.loss(2));
  const at::Tensor accumulated = s.net->first->weight.grad().clone();
  s.acc->zero_grad();
  BOOST_TEST(!s.net->first->weight.grad().defined());
  s.acc->backward(s.loss(1));
  const at::Tensor first = s.net->first->weight.grad().clone();
  s.acc->zero_grad();
  s.acc->backward(s.loss(2));
  BOOST_TEST(at::allclose(accumulated, first + s.net->first->weight.grad(), 1e-5, 1e-6));
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_matches_torch) {
  Setup s;
  s.acc->backward(s.loss(5) * 100);
  std::vector<at::Tensor> grads;
  for (const auto& p : s.net->parameters()) if (p.grad().defined()) grads.push_back(p.grad().clone());
  double expected = 0;
  for (const auto& g : grads) expected += g.pow(2).sum().item<double>();
  expected = std::sqrt(expected);
  const double measured = s.acc->clip_grad_norm(0.5);
  BOOST_TEST(std::abs(measured - expected) / expected < 1e-5);
  double clipped = 0;
  for (const auto& p : s.net->parameters()) if (p.grad().defined()) clipped += p.grad().pow(2).sum().item<double>();
  BOOST_TEST(std::abs(std::sqrt(clipped) - 0.5) < 1e-4);
  BOOST_TEST(std::abs(s.acc->clip_grad_norm(0.0) - std::sqrt(clipped)) < 1e-5);  // measuring only
}

BOOST_AUTO_TEST_CASE(gather_for_metrics_drops_padding_rows) {
  Setup s;
  const at::Tensor values = at::arange(8, at::kLong).reshape({4, 2});
  const at::Tensor padding = at::tensor(std::vector<int64_t>{0, 1, 0, 1}).to(at::kBool);
  const at::Tensor gathered = s.acc->gather_for_metrics(values, padding);
  BOOST_TEST_REQUIRE(gathered.size(0) == 2);
  BOOST_TEST(gathered[1][0].item<int64_t>() == 4);
  BOOST_CHECK_THROW((void)s.acc->gather_for_metrics(values, padding.narrow(0, 0, 3)), Error);
}

BOOST_AUTO_TEST_CASE(seed_step_is_a_pure_function_of_step_and_micro_batch) {
  Setup s;
  s.acc->seed_step(4, 1);
  const at::Tensor a = at::rand({8});
  s.acc->seed_step(4, 1);
  BOOST_TEST(at::equal(a, at::rand({8})));
  s.acc->seed_step(5, 1);
  BOOST_TEST(!at::equal(a, at::rand({8})));
}

BOOST_AUTO_TEST_CASE(save_state_and_load_state_restore_weights_and_optimizer) {
  Scratch scratch("state");
  Setup s;
  const auto optimizer = optim::make_optimizer(optim::OptimizerOptions{}, s.net->named_parameters().pairs(),
                                               models::no_weight_decay_parameters(*s.net));
  s.acc->register_optimizer(*optimizer);
  s.acc->backward(s.loss(9));
  optimizer->step(1e-2);
  const at::Tensor weight = s.net->first->weight.detach().clone();
  const at::Tensor moment = optimizer->state_dict().at("exp_avg.first.weight").clone();
  s.acc->save_state(scratch / "ckpt", nlohmann::json{{"global_step", 1}});
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    BOOST_TEST(fs::is_regular_file(scratch / "ckpt" / file), file);
  s.acc->backward(s.loss(10));
  optimizer->step(1e-2);
  BOOST_TEST(!at::equal(weight, s.net->first->weight));
  const nlohmann::json state = s.acc->load_state(scratch / "ckpt");
  BOOST_TEST(state["global_step"] == 1);
  BOOST_TEST(at::equal(weight, s.net->first->weight));
  BOOST_TEST(at::equal(moment, optimizer->state_dict().at("exp_avg.first.weight")));
  BOOST_TEST(optimizer->steps() == 1);
}

BOOST_AUTO_TEST_CASE(load_state_names_a_mismatched_checkpoint) {
  Scratch scratch("mismatch");
  Setup s;
  fs::create_directories(scratch / "bad");
  models::save_tensor_file(scratch / "bad" / "model.safetensors", models::TensorMap{{"first.weight", at::zeros({2, 2})}});
  BOOST_CHECK_EXCEPTION((void)s.acc->load_state(scratch / "bad"), Error, [](const Error& e) {
    const std::string m = e.what();
    return m.find("first.weight") != std::string::npos && m.find("missing 'second.bias'") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(prepare_data_reports_which_rank_failed) {
  Setup s;
  BOOST_CHECK_EXCEPTION((void)s.acc->prepare_data("/nonexistent/data.h5", {}), Error, [](const Error& e) {
    const std::string m = e.what();
    return m.find("rank 0") != std::string::npos && m.find("/nonexistent/data.h5") != std::string::npos;
  });
  BOOST_CHECK_THROW(s.acc->prepare_model(*s.net), Error);  // once per Accelerator
}

BOOST_AUTO_TEST_SUITE_END()
