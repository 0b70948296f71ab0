// trainer_state.json fields are validated on resume (issue 12, item 5): a clear error naming the file and field.
#include <boost/test/unit_test.hpp>

#include "hpctrain/core/error.hpp"
#include "hpctrain/train/trainer_state.hpp"

using namespace hpctrain;
using namespace hpctrain::train;

namespace {

nlohmann::json valid_state() {
  TrainerState s;
  s.geometry.world_size = 2, s.geometry.per_rank_batch = 4, s.geometry.seed = 7, s.geometry.train_examples = 103;
  s.global_step = 12, s.position = {1, 40}, s.samples_seen = 140, s.max_steps = 50, s.run_id = "abc";
  s.schedule = {ScheduleKind::linear, 1e-3, 2, 50};
  return to_json(s);
}

// The error trainer_state_from_json gives for `j`, or "" when it accepts it.
std::string error_of(const nlohmann::json& j) {
  try {
    (void)trainer_state_from_json(j, "run/checkpoint-12/trainer_state.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_state_validation)

BOOST_AUTO_TEST_CASE(a_valid_state_is_accepted_with_its_run_id) {
  BOOST_TEST(error_of(valid_state()) == "");
  BOOST_TEST(trainer_state_from_json(valid_state(), "x").run_id == "abc");
}

BOOST_AUTO_TEST_CASE(each_bad_field_is_named_with_the_file) {
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"epoch 1e6", [](auto& j) { j["epoch"] = 1e6; }, "field 'epoch' is 1000000.0"},
      {"epoch_index 1e6", [](auto& j) { j["hpctrain"]["epoch_index"] = 1000000; }, "field 'hpctrain.epoch_index'"},
      {"negative step", [](auto& j) { j["global_step"] = -1; }, "field 'global_step' is -1"},
      {"step beyond max_steps", [](auto& j) { j["global_step"] = 51; }, "'global_step' 51 is beyond max_steps 50"},
      {"step as text", [](auto& j) { j["global_step"] = "12"; }, "field 'global_step' has type string"},
      {"fractional step", [](auto& j) { j["global_step"] = 12.5; }, "field 'global_step' has type number"},
      {"position past the epoch", [](auto& j) { j["hpctrain"]["samples_in_epoch"] = 105; }, "samples_in_epoch' is 105"},
      {"negative samples", [](auto& j) { j["hpctrain"]["samples_seen"] = -4; }, "field 'hpctrain.samples_seen'"},
      {"more skipped than taken", [](auto& j) { j["hpctrain"]["skipped_steps"] = 13; }, "hpctrain.skipped_steps"},
      {"zero ranks", [](auto& j) { j["hpctrain"]["geometry"]["world_size"] = 0; }, "hpctrain.geometry.world_size"},
      {"negative seed", [](auto& j) { j["hpctrain"]["geometry"]["seed"] = -7; }, "hpctrain.geometry.seed"},
      {"NaN-like lr", [](auto& j) { j["hpctrain"]["scheduler"]["base_lr"] = "nan"; }, "hpctrain.scheduler.base_lr"},
      {"run id as number", [](auto& j) { j["hpctrain"]["run_id"] = 5; }, "hpctrain.run_id"},
      {"log history as object", [](auto& j) { j["log_history"] = nlohmann::json::object(); }, "'log_history'"},
      {"missing epoch", [](auto& j) { j.erase("epoch"); }, "missing field 'epoch'"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = valid_state();
    c.edit(j);
    const std::string message = error_of(j);
    BOOST_TEST(has(message, "run/checkpoint-12/trainer_state.json"), c.what << ": " << message);
    BOOST_TEST(has(message, c.expected), c.what << ": expected '" << c.expected << "' in: " << message);
  }
}

BOOST_AUTO_TEST_CASE(not_an_object_is_refused) {
  BOOST_TEST(has(error_of(nlohmann::json::array()), "expected a JSON object"));
}

BOOST_AUTO_TEST_SUITE_END()
