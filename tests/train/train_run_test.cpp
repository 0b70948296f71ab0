// run_training end to end in one process: the run folder's layout, exact resume, option and loss errors.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include <fstream>
#include <functional>
#include <map>

#include "../error_capture.hpp"
#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/pretrained.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/run_folder.hpp"
#include "hpctrain/train/trainer.hpp"

using namespace hpctrain;
using namespace hpctrain::train;
using trainer_test::Scratch;
namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// step -> loss of metrics.jsonl's step lines.
std::map<int64_t, double> losses(const fs::path& output) {
  std::map<int64_t, double> out;
  for (const auto& line : read_lines(output / "metrics.jsonl"))
    if (line.contains("loss")) out[line["step"].get<int64_t>()] = line["loss"].get<double>();
  return out;
}

double max_weight_difference(const fs::path& a, const fs::path& b) {
  const auto wa = models::read_weights(a), wb = models::read_weights(b);
  BOOST_REQUIRE(wa.size() == wb.size());
  double worst = 0;
  for (const auto& [name, tensor] : wa) worst = std::max(worst, (tensor - wb.at(name)).abs().max().item<double>());
  return worst;
}

TrainResult run_once(const TrainOptions& options) {
  auto comm = dist::make_single_process_comm();
  return run_training(*comm, options);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(train_run)

BOOST_AUTO_TEST_CASE(a_run_writes_hugging_face_checkpoints_metrics_and_a_final_model) {
  Scratch scratch("layout");
  TrainOptions o = trainer_test::tiny_options(scratch);
  o.save_steps = 2, o.save_total_limit = 2, o.eval_steps = 3;
  const TrainResult result = run_once(o);
  BOOST_TEST(result.global_step == 6);  // 24 examples / 4 per step
  BOOST_TEST_REQUIRE(result.eval.has_value());
  BOOST_TEST(result.eval->examples == 10);
  BOOST_TEST(result.majority_baseline > 0.0);
  const auto kept = list_checkpoints(o.output);
  BOOST_TEST_REQUIRE(kept.size() == 2u);
  BOOST_TEST(kept[0].step == 4);
  BOOST_TEST(kept[1].step == 6);
  for (const char* file : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    BOOST_TEST(fs::is_regular_file(kept[1].path / file), file);
  const io::HfConfig config = io::HfConfig::load(o.output / "final");
  BOOST_TEST((config.common.id2label == std::vector<std::string>{"red", "green", "blue"}));
  BOOST_TEST(config.common.architectures.at(0) == "DistilBertForSequenceClassification");
  BOOST_TEST(max_weight_difference(o.output / "final", kept[1].path) == 0.0);
  const nlohmann::json state = nlohmann::json::parse(read_text(kept[1].path / "trainer_state.json"));
  BOOST_TEST(state["global_step"] == 6);
  BOOST_TEST(state["hpctrain"]["epoch_index"] == 1);  // the epoch is complete
  BOOST_TEST(state["hpctrain"]["samples_seen"] == 24);
  BOOST_TEST(state["hpctrain"]["geometry"]["global_batch_size"] == 4);
  BOOST_TEST(state["log_history"].size() == 6u + 2u);  // 6 steps + evals at 3 and 6
  BOOST_TEST(losses(o.output).size() == 6u);
  const auto first = read_lines(o.output / "metrics.jsonl").front();
  for (const char* key : {"step", "epoch", "loss", "lr", "grad_norm", "samples_per_second"}) BOOST_TEST(first.contains(key), key);
  for (const char* key : {"data_wait", "forward", "backward", "exposed_communication", "optimizer"})
    BOOST_TEST(first["time"].contains(key), key);
}

BOOST_AUTO_TEST_CASE(resume_after_an_interruption_equals_the_uninterrupted_run) {
  Scratch scratch("resume");
  TrainOptions o = trainer_test::tiny_options(scratch, /*dropout=*/0.2);  // dropout on: Note [Dropout seeds]
  o.lr_scheduler = "constant", o.warmup_steps = 2, o.max_steps = 8, o.save_steps = 3;
  o.output = scratch / "whole";
  run_once(o);
  o.output = scratch / "pieces";
  o.max_steps = 5;  // stops mid-epoch (6 steps per epoch)
  run_once(o);
  o.max_steps = 8, o.resume = "auto";
  const TrainResult resumed = run_once(o);
  BOOST_TEST(resumed.start_step == 5);
  BOOST_TEST(resumed.global_step == 8);
  BOOST_TEST(max_weight_difference(scratch / "whole" / "final", scratch / "pieces" / "final") < 1e-6);
  const auto whole = losses(scratch / "whole"), pieces = losses(scratch / "pieces");
  BOOST_TEST_REQUIRE(whole.size() == 8u);
  BOOST_TEST_REQUIRE(pieces.size() == 8u);
  for (const auto& [step, loss] : whole) BOOST_TEST(std::abs(pieces.at(step) - loss) < 1e-6, "step " << step);
}

BOOST_AUTO_TEST_CASE(invalid_options_are_rejected_before_any_work) {
  Scratch scratch("invalid");
  const TrainOptions good = trainer_test::tiny_options(scratch);
  const std::vector<std::pair<std::function<void(TrainOptions&)>, std::string>> cases = {
      {[](TrainOptions& o) { o.batch_size = 0; }, "--batch-size 0"},
      {[](TrainOptions& o) { o.lr_scheduler = "step"; }, "step"},
      {[](TrainOptions& o) { o.model_dir = "/tmp"; }, "exactly one of --model"},
      {[](TrainOptions& o) { o.data = "/nonexistent.h5"; }, "/nonexistent.h5"},
      {[](TrainOptions& o) { o.warmup_ratio = 1.5; }, "--warmup-ratio"},
      {[](TrainOptions& o) { o.resume = "/nonexistent"; }, "--resume '/nonexistent'"},
      {[](TrainOptions& o) { o.model_config = "preset:huge"; }, "unknown preset"},
  };
  for (const auto& [edit, expected] : cases) {
    TrainOptions o = good;
    edit(o);
    try {
      run_once(o);
      BOOST_ERROR("expected an error mentioning " << expected);
    } catch (const Error& e) {
      BOOST_TEST(std::string(e.what()).find(expected) != std::string::npos, e.what());
    }
  }
  BOOST_TEST(!fs::exists(good.output / "metrics.jsonl"));
}

BOOST_AUTO_TEST_CASE(a_non_finite_loss_stops_or_is_skipped) {
  Scratch scratch("nonfinite");
  TrainOptions o = trainer_test::tiny_options(scratch);
  o.lr = 1e30, o.max_grad_norm = 0, o.lr_scheduler = "constant";
  BOOST_CHECK_EXCEPTION(run_once(o), Error, [](const Error& e) {
    return std::string(e.what()).find("not finite") != std::string::npos;
  });
  o.skip_nonfinite = true;
  o.output = scratch / "skipping";
  const TrainResult result = run_once(o);
  BOOST_TEST(result.global_step == 6);
  const nlohmann::json state = nlohmann::json::parse(read_text(o.output / "trainer_state.json"));
  BOOST_TEST(state["hpctrain"]["skipped_steps"].get<int64_t>() > 0);
}

// Note [Run outputs]: everything a run writes at the top of OUTPUT is in the one list (a LoRA run with --merge-lora,
// TensorBoard, checkpoints and a --timeline inside OUTPUT leaves nothing else); --overwrite-output-dir moves all of
// it aside, final-merged/ included (it was overwritten in place); an input inside those outputs is refused
// (`--model X/final-merged --output X` overwrote its own input).
BOOST_AUTO_TEST_CASE(nothing_of_an_old_run_is_destroyed) {
  Scratch scratch("outputs");
  TrainOptions base = trainer_test::tiny_options(scratch);
  base.max_steps = 2;
  base.output = scratch / "base";
  (void)run_once(base);
  TrainOptions o = trainer_test::tiny_options(scratch);
  o.model_config.clear();
  o.model_dir = base.output / "final";
  o.lora_r = 2, o.merge_lora = true, o.max_steps = 2, o.save_steps = 1, o.report_to = "tensorboard";
  o.timeline = o.output / "timeline.json";
  fs::create_directories(o.output);
  std::ofstream(o.model_dir / "generation_config.json") << "{\"eos_token_id\": 3}\n";  // the base's: kept
  (void)run_once(o);
  for (const char* folder : {"final", "final-merged"})
    BOOST_TEST(fs::is_regular_file(o.output / folder / "generation_config.json"), folder);
  for (const auto& entry : fs::directory_iterator(o.output))
    BOOST_TEST(is_run_output(entry.path().filename().string(), extra_run_outputs(o)), entry.path().filename().string());
  const auto merged_before = models::read_weights(o.output / "final-merged");

  TrainOptions again = o;
  again.overwrite_output_dir = true, again.lr = 5e-2;
  (void)run_once(again);
  std::map<std::string, fs::path> aside;
  for (const auto& entry : fs::directory_iterator(o.output)) {
    const std::string name = entry.path().filename().string();
    if (name.find(".run-") != std::string::npos) aside[name.substr(0, name.find(".run-"))] = entry.path();
  }
  for (const char* name : {"final", "final-merged", "metrics", "runs", "run", "trainer_state", "timeline"})
    BOOST_TEST(aside.count(name) == 1u, name << " was not moved aside");
  BOOST_TEST_REQUIRE(aside.count("final-merged") == 1u);
  const auto merged_kept = models::read_weights(aside.at("final-merged"));
  BOOST_TEST_REQUIRE(merged_kept.size() == merged_before.size());
  for (const auto& [name, tensor] : merged_before) BOOST_TEST(at::equal(tensor, merged_kept.at(name)), name);

  TrainOptions own_input = o;
  own_input.model_dir = o.output / "final-merged";
  own_input.lora_r = 0, own_input.merge_lora = false, own_input.overwrite_output_dir = true;
  const std::string message = hpctrain::testing::error_message([&] { (void)run_once(own_input); });
  BOOST_TEST(message.find("--model '" + (o.output / "final-merged").string() + "' lies in") != std::string::npos, message);
  TrainOptions in_checkpoint = own_input;
  in_checkpoint.model_dir = o.output / "checkpoint-2";
  const std::string checkpoint_message = hpctrain::testing::error_message([&] { (void)run_once(in_checkpoint); });
  BOOST_TEST(checkpoint_message.find("lies in the checkpoint") != std::string::npos, checkpoint_message);
}

BOOST_AUTO_TEST_SUITE_END()
