// optimizer.safetensors through the Optimizer interface (Note [Optimizer checkpoints]): the type tag and
// hyper-parameters in the metadata, strict loading, another optimizer's file refused naming both, and
// state round trips for every --optim name.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "../error_capture.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/safetensors.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/optim/optimizer.hpp"

using namespace hpctrain;
using namespace hpctrain::optim;
using hpctrain::testing::error_message;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("hpctrain-optim-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

NamedParameters parameters(uint64_t seed) {
  at::manual_seed(seed);
  return {{"layer.weight", at::randn({6, 4}).set_requires_grad(true)},
          {"layer.bias", at::randn({4}).set_requires_grad(true)}};
}

const std::set<std::string> kCheckpointNoDecay = {"layer.bias"};  // Trainer's no-decay group: the bias

OptimizerOptions options_for(const std::string& optim) {
  OptimizerOptions o;
  o.optim = optim, o.weight_decay = 0.01, o.sgd_momentum = 0.9, o.adafactor_beta1 = 0.5;
  return o;
}

// Two steps with gradients from `seed`.
void two_steps(Optimizer& optimizer, NamedParameters& named, uint64_t seed) {
  at::manual_seed(seed);
  for (int k = 0; k < 2; ++k) {
    for (auto& [name, p] : named) p.mutable_grad() = at::randn(p.sizes());
    optimizer.step(0.01);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(optimizer_checkpoint)

BOOST_AUTO_TEST_CASE(every_optimizer_round_trips_and_resumes_exactly) {
  Scratch scratch;
  for (const std::string optim : {"adamw", "sgd", "adafactor"}) {
    BOOST_TEST_CONTEXT(optim) {
      // straight: 4 steps; pieces: 2 steps, file, a fresh optimizer loads it, 2 more steps
      NamedParameters straight = parameters(1), pieces = parameters(1);
      const auto a = make_optimizer(options_for(optim), straight, kCheckpointNoDecay);
      two_steps(*a, straight, 10), two_steps(*a, straight, 20);
      const auto b = make_optimizer(options_for(optim), pieces, kCheckpointNoDecay);
      two_steps(*b, pieces, 10);
      save_optimizer_file(scratch.dir / "optimizer.safetensors", *b);
      const auto c = make_optimizer(options_for(optim), pieces, kCheckpointNoDecay);
      c->load_state_dict(read_optimizer_file(scratch.dir / "optimizer.safetensors", *c));
      BOOST_TEST(c->steps() == 2);
      two_steps(*c, pieces, 20);
      for (std::size_t i = 0; i < straight.size(); ++i)
        BOOST_TEST(at::equal(straight[i].second, pieces[i].second), straight[i].first << " differs after resume");
      const io::SafetensorsFile file(scratch.dir / "optimizer.safetensors");
      BOOST_TEST(file.metadata().at("optimizer") == a->type());
      BOOST_TEST(file.metadata().at("optimizer_hyperparameters").find("\"decay\":0.01") != std::string::npos,
                 file.metadata().at("optimizer_hyperparameters"));
      BOOST_TEST(a->state_bytes() > 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(another_optimizers_file_is_refused_naming_both) {
  Scratch scratch;
  NamedParameters named = parameters(2);
  const auto sgd = make_optimizer(options_for("sgd"), named, kCheckpointNoDecay);
  save_optimizer_file(scratch.dir / "optimizer.safetensors", *sgd);
  const auto adafactor = make_optimizer(options_for("adafactor"), named, kCheckpointNoDecay);
  const std::string message = error_message([&] { (void)read_optimizer_file(scratch.dir / "optimizer.safetensors", *adafactor); });
  BOOST_TEST(message.find("holds the state of optimizer 'sgd'") != std::string::npos, message);
  BOOST_TEST(message.find("this run uses 'adafactor'") != std::string::npos, message);
  BOOST_TEST(message.find("optimizer.safetensors") != std::string::npos, message);

  // A file from before the tags (plain tensors, {"format": "pt"}) is AdamW's.
  const auto adamw = make_optimizer(options_for("adamw_torch"), named, kCheckpointNoDecay);
  models::save_tensor_file(scratch.dir / "legacy.safetensors", adamw->state_dict());
  adamw->load_state_dict(read_optimizer_file(scratch.dir / "legacy.safetensors", *adamw));
  const std::string legacy = error_message([&] { (void)read_optimizer_file(scratch.dir / "legacy.safetensors", *sgd); });
  BOOST_TEST(legacy.find("'adamw_torch' (no optimizer tag") != std::string::npos, legacy);
}

BOOST_AUTO_TEST_CASE(changed_hyperparameters_are_noted_and_state_shape_is_strict) {
  Scratch scratch;
  NamedParameters named = parameters(3);
  const auto with_moment = make_optimizer(options_for("adafactor"), named, kCheckpointNoDecay);
  save_optimizer_file(scratch.dir / "optimizer.safetensors", *with_moment);
  OptimizerOptions no_moment = options_for("adafactor");
  no_moment.adafactor_beta1 = 0.0;
  const auto other = make_optimizer(no_moment, named, kCheckpointNoDecay);
  std::string note;
  const std::string message =
      error_message([&] { (void)read_optimizer_file(scratch.dir / "optimizer.safetensors", *other, &note); });
  BOOST_TEST(message.find("optimizer.safetensors': not a valid state of this adafactor optimizer") != std::string::npos,
             message);
  BOOST_TEST(message.find("unexpected 'exp_avg.layer.weight'") != std::string::npos, message);
  BOOST_TEST(message.find("note: '" + (scratch.dir / "optimizer.safetensors").string() +
                          "': the optimizer's hyper-parameters were") != std::string::npos,
             message);
  BOOST_TEST(message.find("\"beta1\":0.5") != std::string::npos, message);
  // A change that keeps the tensors loads, with the note.
  OptimizerOptions other_decay = options_for("adafactor");
  other_decay.weight_decay = 0.5;
  const auto decayed = make_optimizer(other_decay, named, kCheckpointNoDecay);
  decayed->load_state_dict(read_optimizer_file(scratch.dir / "optimizer.safetensors", *decayed, &note));
  BOOST_TEST(note.find("\"decay\":0.01") != std::string::npos, note);
  BOOST_TEST(error_message([&] {
               other->load_state_dict(with_moment->state_dict());
             }).find("unexpected 'exp_avg.layer.weight'") != std::string::npos);
  OptimizerState no_step = with_moment->state_dict();
  no_step.erase("step");
  BOOST_TEST(error_message([&] { with_moment->load_state_dict(no_step); }).find("missing 'step'") != std::string::npos);
}

// Note [Optimizer state checks]: a state whose file is whole but whose values would poison training is
// refused naming the file, the tensor, expected and actual; through read_optimizer_file and load_state_dict.
namespace {

// A 64x80 weight (5,120 elements: quantized by adamw_bnb_8bit, 20 blocks) and its bias.
NamedParameters large_parameters() {
  at::manual_seed(4);
  return {{"layer.weight", at::randn({64, 80}).set_requires_grad(true)},
          {"layer.bias", at::randn({80}).set_requires_grad(true)}};
}

// A copy of `optimizer`'s state with `edit` applied, written as `path` with the optimizer's metadata (as
// a consistent rewrite with its checksum recomputed would be).
template <typename Edit>
void write_edited_state(const fs::path& path, const Optimizer& optimizer, Edit edit) {
  OptimizerState state;
  for (const auto& [name, tensor] : optimizer.state_dict()) state.emplace(name, tensor.clone());
  edit(state);
  const models::HostViews host = models::host_views(state);
  io::save_safetensors(path, host.views, optimizer_file_metadata(optimizer));
}

}  // namespace

BOOST_AUTO_TEST_CASE(poisoned_states_are_refused_naming_the_file_and_the_tensor) {
  Scratch scratch;
  struct Case {
    std::string optim, expected;
    std::function<void(OptimizerState&)> edit;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<Case> cases = {
      {"adamw_8bit",
       "'exp_avg_absmax.layer.weight' holds nan at element 3 (1 of 20 values bad), expected a finite "
       "number >= 0",
       [&](OptimizerState& s) { s["exp_avg_absmax.layer.weight"][3] = nan; }},
      {"adamw_8bit",
       "'exp_avg_sq_absmax.layer.weight' holds -0.5 at element 0 (20 of 20 values bad), expected a "
       "finite number >= 0",
       [](OptimizerState& s) { s["exp_avg_sq_absmax.layer.weight"].fill_(-0.5); }},
      {"adamw_8bit", "'exp_avg.layer.weight' is I8, expected U8",
       [](OptimizerState& s) { s["exp_avg.layer.weight"] = s["exp_avg.layer.weight"].to(at::kChar); }},
      {"adamw_8bit",
       "'exp_avg_sq.layer.bias' holds -1 at element 7 (1 of 80 values bad), expected a finite number >= 0",
       [](OptimizerState& s) { s["exp_avg_sq.layer.bias"][7] = -1.0; }},
      {"adamw_8bit", "'step' is -3, expected an integer >= 0", [](OptimizerState& s) { s["step"].fill_(-3); }},
      {"adamw", "'exp_avg.layer.bias' holds inf at element 2 (1 of 80 values bad), expected a finite number",
       [&](OptimizerState& s) { s["exp_avg.layer.bias"][2] = inf; }},
      {"adamw", "'exp_avg_sq.layer.weight' holds -2 at element 0 (1 of 5120 values bad), expected a finite number >= 0",
       [](OptimizerState& s) { s["exp_avg_sq.layer.weight"][0][0] = -2.0; }},
      {"adamw", "'exp_avg.layer.weight' is F64, expected F32",
       [](OptimizerState& s) { s["exp_avg.layer.weight"] = s["exp_avg.layer.weight"].to(at::kDouble); }},
      {"adamw", "'step' is F32, expected I64", [](OptimizerState& s) { s["step"] = s["step"].to(at::kFloat); }},
      {"sgd", "'momentum_buffer.layer.bias' holds nan at element 0 (80 of 80 values bad), expected a finite number",
       [&](OptimizerState& s) { s["momentum_buffer.layer.bias"].fill_(nan); }},
      {"sgd", "'step.layer.weight' is -1, expected an integer >= 0",
       [](OptimizerState& s) { s["step.layer.weight"].fill_(-1); }},
      {"adafactor",
       "'exp_avg_sq_row.layer.weight' holds -1 at element 5 (1 of 64 values bad), expected a finite number >= 0",
       [](OptimizerState& s) { s["exp_avg_sq_row.layer.weight"][5] = -1.0; }},
      {"adafactor", "'exp_avg_sq.layer.bias' holds nan at element 1 (1 of 80 values bad)",
       [&](OptimizerState& s) { s["exp_avg_sq.layer.bias"][1] = nan; }},
      {"adafactor", "'step.layer.bias' is -7, expected an integer >= 0",
       [](OptimizerState& s) { s["step.layer.bias"].fill_(-7); }},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.optim << ": " << c.expected) {
      NamedParameters named = large_parameters();
      const auto optimizer = make_optimizer(options_for(c.optim), named, kCheckpointNoDecay);
      two_steps(*optimizer, named, 5);
      const fs::path file = scratch.dir / "optimizer.safetensors";
      write_edited_state(file, *optimizer, c.edit);
      const std::string message = error_message([&] { (void)read_optimizer_file(file, *optimizer); });
      BOOST_TEST(
          message.find("'" + file.string() + "': not a valid state of this " + optimizer->type()) != std::string::npos,
          message);
      BOOST_TEST(message.find(c.expected) != std::string::npos, message);
      // The same check guards load_state_dict (custom loops), and nothing was copied in.
      OptimizerState edited = models::load_tensor_file(file);
      const std::string direct = error_message([&] { optimizer->load_state_dict(edited); });
      BOOST_TEST(direct.find("optimizer state: not a valid state") != std::string::npos, direct);
      BOOST_TEST(direct.find(c.expected) != std::string::npos, direct);
      BOOST_TEST(optimizer->steps() == 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_block_absmax_of_zero_is_valid) {
  // A block that never saw a non-zero gradient keeps absmax 0 (the initial state): it loads.
  Scratch scratch;
  NamedParameters named = large_parameters();
  const auto optimizer = make_optimizer(options_for("adamw_8bit"), named, kCheckpointNoDecay);
  const fs::path file = scratch.dir / "optimizer.safetensors";
  save_optimizer_file(file, *optimizer);
  BOOST_TEST(error_message([&] { optimizer->load_state_dict(read_optimizer_file(file, *optimizer)); }).empty());
}

BOOST_AUTO_TEST_CASE(names_aliases_and_option_errors) {
  BOOST_TEST(canonical_optimizer_name("adamw") == "adamw_torch");
  BOOST_TEST(canonical_optimizer_name("sgd") == "sgd");
  const std::string unknown = error_message([] { (void)canonical_optimizer_name("lion"); });
  BOOST_TEST(unknown.find("--optim 'lion': unknown optimizer; expected one of adamw_torch (adamw)") != std::string::npos,
             unknown);
  OptimizerOptions o;
  o.optim = "sgd", o.sgd_nesterov = true;
  BOOST_TEST(error_message([&] { validate_optimizer_options(o); }).find("--sgd-nesterov needs --sgd-momentum > 0") !=
             std::string::npos);
  o.optim = "adafactor", o.adafactor_warmup_init = true;
  BOOST_TEST(error_message([&] { validate_optimizer_options(o); }).find("--adafactor-warmup-init needs") != std::string::npos);
  o.adafactor_warmup_init = false, o.adafactor_beta1 = 1.0;
  BOOST_TEST(error_message([&] { validate_optimizer_options(o); }).find("--adafactor-beta1 1: expected 0 <= beta1") !=
             std::string::npos);
  o.adafactor_beta1 = 0, o.weight_decay = -1;
  BOOST_TEST(error_message([&] { validate_optimizer_options(o); }).find("--weight-decay -1") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(groups_follow_the_no_decay_names_in_order) {
  const NamedParameters named = {{"a.weight", at::zeros({2})}, {"a.bias", at::zeros({2})},
                                 {"b.LayerNorm.weight", at::zeros({2})}, {"c.weight", at::zeros({2})}};
  const auto groups = weight_decay_groups(named, 0.1, {"a.bias", "b.LayerNorm.weight"});
  BOOST_TEST_REQUIRE(groups.size() == 2u);
  BOOST_TEST(groups[0].name == "decay");
  BOOST_TEST(groups[0].weight_decay == 0.1);
  BOOST_TEST(groups[0].parameters.size() == 2u);
  BOOST_TEST(groups[1].name == "no_decay");
  BOOST_TEST(groups[1].weight_decay == 0.0);
  BOOST_TEST(groups[1].parameters[1].first == "b.LayerNorm.weight");
  BOOST_TEST(weight_decay_groups({{"x.bias", at::zeros({1})}}, 0.1, {"x.bias"}).size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
