// trainer_state.json round trip and plan_start's resume rules (Note [Resume position]), as pure functions.
#include <boost/test/unit_test.hpp>

#include <set>

#include "hpctrain/core/error.hpp"
#include "hpctrain/data/sampler.hpp"
#include "hpctrain/train/trainer_state.hpp"

using namespace hpctrain;
using namespace hpctrain::train;

namespace {

RunGeometry geometry(int world, int64_t batch, data::ShuffleMode shuffle = data::ShuffleMode::global,
                     int64_t accumulation = 1) {
  RunGeometry g;
  g.world_size = world, g.per_rank_batch = batch, g.accumulation = accumulation, g.shuffle = shuffle;
  g.seed = 7, g.train_examples = 103;
  return g;
}

TrainerState saved_state(const RunGeometry& g, int64_t step, int64_t samples) {
  TrainerState s;
  s.geometry = g, s.global_step = step, s.position = {1, samples};
  s.schedule = {ScheduleKind::cosine, 1e-3, 2, 50};
  return s;
}

// The examples a rank of `g` trains on from `position` to the end of the epoch (padding excluded).
std::vector<int64_t> rest_of_epoch(const RunGeometry& g, int rank, int64_t epoch, int64_t samples_in_epoch) {
  data::SamplerConfig c{g.train_examples, rank, g.world_size, g.per_rank_batch, false, g.shuffle, g.seed, 0};
  const auto order = data::epoch_order(c, epoch);
  std::vector<int64_t> out;
  for (int64_t b = samples_in_epoch / (g.per_rank_batch * g.world_size); b < data::batches_per_epoch(c); ++b) {
    const auto positions = data::batch_positions(order, c, b);
    for (std::size_t row = 0; row < positions.size(); ++row)
      if (!positions[row].is_padding && !before_position(g, rank, b, static_cast<int64_t>(row), samples_in_epoch))
        out.push_back(positions[row].example);
  }
  return out;
}

// The examples the ranks of `g` train on in batches [0, batches) of an epoch.
std::vector<int64_t> first_batches(const RunGeometry& g, int64_t epoch, int64_t batches) {
  std::vector<int64_t> out;
  for (int rank = 0; rank < g.world_size; ++rank) {
    data::SamplerConfig c{g.train_examples, rank, g.world_size, g.per_rank_batch, false, g.shuffle, g.seed, 0};
    const auto order = data::epoch_order(c, epoch);
    for (int64_t b = 0; b < batches; ++b)
      for (const auto& p : data::batch_positions(order, c, b)) if (!p.is_padding) out.push_back(p.example);
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trainer_state)

BOOST_AUTO_TEST_CASE(json_round_trip_keeps_every_field_and_hf_keys) {
  TrainerState s = saved_state(geometry(2, 4), 12, 40);
  s.samples_seen = 96, s.skipped_steps = 1, s.best_metric = 0.75, s.best_model_checkpoint = "run/checkpoint-10";
  s.max_steps = 50, s.logging_steps = 5;
  s.log_history.push_back({{"step", 5}, {"loss", 1.5}});
  const nlohmann::json j = to_json(s);
  for (const char* key : {"global_step", "epoch", "log_history", "best_metric", "best_model_checkpoint", "max_steps",
                          "train_batch_size", "num_train_epochs", "logging_steps", "save_steps", "eval_steps"})
    BOOST_TEST(j.contains(key), key);
  BOOST_TEST(j["train_batch_size"] == 4);
  const TrainerState back = trainer_state_from_json(nlohmann::json::parse(j.dump()), "test");
  BOOST_TEST(back.global_step == 12);
  BOOST_TEST(back.position.epoch == 1);
  BOOST_TEST(back.position.samples_in_epoch == 40);
  BOOST_TEST(back.samples_seen == 96);
  BOOST_TEST(back.skipped_steps == 1);
  BOOST_TEST(back.geometry.global_batch() == 8);
  BOOST_TEST(back.geometry.seed == 7u);
  BOOST_TEST((back.schedule.kind == ScheduleKind::cosine));
  BOOST_TEST(back.schedule.total_steps == 50);
  BOOST_TEST(*back.best_metric == 0.75);
  BOOST_TEST(back.log_history.size() == 1u);
  BOOST_TEST(back.epoch_float() == 1.0 + 40.0 / 104.0);
}

BOOST_AUTO_TEST_CASE(state_without_hpctrain_object_is_refused_by_name) {
  nlohmann::json j = to_json(saved_state(geometry(1, 2), 1, 2));
  j.erase("hpctrain");
  BOOST_CHECK_EXCEPTION((void)trainer_state_from_json(j, "ckpt/trainer_state.json"), Error, [](const Error& e) {
    return std::string(e.what()).find("ckpt/trainer_state.json") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(fresh_run_starts_at_zero) {
  const StartPlan plan = plan_start(nullptr, geometry(2, 4));
  BOOST_TEST(plan.global_step == 0);
  BOOST_TEST(plan.first_batch == 0);
  BOOST_TEST(plan.notes.empty());
  // 103 examples on 2 ranks: 52 per rank, 13 micro-batches of 4, 13 steps per epoch.
  BOOST_TEST(total_steps(plan, 3, -1) == 39);
  BOOST_TEST(total_steps(plan, 3, 5) == 5);
}

BOOST_AUTO_TEST_CASE(same_geometry_continues_at_the_saved_batch) {
  const TrainerState s = saved_state(geometry(2, 4), 16, 24);  // 3 micro-batches of 8 into epoch 1
  const StartPlan plan = plan_start(&s, geometry(2, 4));
  BOOST_TEST(plan.first_batch == 3);
  BOOST_TEST(plan.global_step == 16);
  BOOST_TEST(plan.position.epoch == 1);
  BOOST_TEST(plan.notes.empty());
  BOOST_TEST(total_steps(plan, 2, -1) == 16 + 10);  // 13 - 3 steps left in the last epoch
}

BOOST_AUTO_TEST_CASE(fewer_ranks_keep_the_global_batch) {
  const TrainerState s = saved_state(geometry(2, 4), 16, 24);
  const StartPlan plan = plan_start(&s, geometry(1, 4));
  BOOST_TEST(plan.geometry.per_rank_batch == 8);
  BOOST_TEST(plan.first_batch == 3);
  BOOST_TEST(!plan.notes.empty());
}

BOOST_AUTO_TEST_CASE(a_global_batch_that_does_not_divide_changes_and_says_so) {
  const TrainerState s = saved_state(geometry(2, 4), 16, 24);
  const StartPlan plan = plan_start(&s, geometry(3, 3));  // 8 is not divisible by 3
  BOOST_TEST(plan.geometry.per_rank_batch == 3);
  BOOST_TEST(plan.first_batch == 2);  // micro-batches of 9: batch 2 holds positions 18..26, 18..23 are skipped
  bool said = false;
  for (const auto& note : plan.notes) said |= note.find("global batch changes from 8 to 9") != std::string::npos;
  BOOST_TEST(said);
}

BOOST_AUTO_TEST_CASE(resume_on_other_world_sizes_covers_the_epoch_exactly_once) {
  const RunGeometry before = geometry(2, 4);
  for (const RunGeometry& after : {geometry(1, 8), geometry(3, 3), geometry(4, 2), geometry(3, 5)}) {
    const int64_t done_batches = 3;
    const TrainerState s = saved_state(before, 10, done_batches * 8);
    const StartPlan plan = plan_start(&s, after);
    std::vector<int64_t> seen = first_batches(before, 1, done_batches);
    for (int rank = 0; rank < plan.geometry.world_size; ++rank) {
      const auto rest = rest_of_epoch(plan.geometry, rank, 1, plan.position.samples_in_epoch);
      seen.insert(seen.end(), rest.begin(), rest.end());
    }
    std::set<int64_t> distinct(seen.begin(), seen.end());
    BOOST_TEST(seen.size() == 103u, "world " << after.world_size << " batch " << after.per_rank_batch);
    BOOST_TEST(distinct.size() == 103u);
  }
}

BOOST_AUTO_TEST_CASE(shard_mode_refuses_another_world_size_mid_epoch_but_not_at_a_boundary) {
  const TrainerState mid = saved_state(geometry(2, 4, data::ShuffleMode::shard), 16, 24);
  BOOST_CHECK_EXCEPTION((void)plan_start(&mid, geometry(3, 4, data::ShuffleMode::shard)), Error, [](const Error& e) {
    return std::string(e.what()).find("--shuffle global") != std::string::npos;
  });
  const StartPlan same = plan_start(&mid, geometry(2, 4, data::ShuffleMode::shard));
  BOOST_TEST(same.first_batch == 3);
  const TrainerState boundary = saved_state(geometry(2, 4, data::ShuffleMode::shard), 13, 0);
  BOOST_TEST(plan_start(&boundary, geometry(3, 4, data::ShuffleMode::shard)).first_batch == 0);
}

BOOST_AUTO_TEST_CASE(checkpoint_seed_and_dataset_size_are_enforced) {
  const TrainerState s = saved_state(geometry(2, 4), 16, 24);
  RunGeometry other_seed = geometry(2, 4);
  other_seed.seed = 99;
  BOOST_TEST(plan_start(&s, other_seed).geometry.seed == 7u);
  RunGeometry other_data = geometry(2, 4);
  other_data.train_examples = 50;
  BOOST_CHECK_THROW((void)plan_start(&s, other_data), Error);
}

BOOST_AUTO_TEST_CASE(an_epoch_with_only_padding_left_rolls_over) {
  const TrainerState s = saved_state(geometry(2, 4), 16, 103);
  const StartPlan plan = plan_start(&s, geometry(2, 4));
  BOOST_TEST(plan.position.epoch == 2);
  BOOST_TEST(plan.first_batch == 0);
}

BOOST_AUTO_TEST_SUITE_END()
