// trainer_state.json and plan_start (trainer_state.hpp, Note [Resume position]).
#include "hpctrain/train/trainer_state.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {
namespace {

using nlohmann::json;

data::SamplerConfig sampler_of(const RunGeometry& g) {
  data::SamplerConfig config;
  config.num_examples = g.train_examples;
  config.world_size = g.world_size;
  config.batch_size = g.per_rank_batch;
  config.drop_last = g.drop_last;
  config.shuffle = g.shuffle;
  config.seed = g.seed;
  return config;
}

template <typename T>
T get(const json& object, const char* key, const std::string& source) {
  HPCTRAIN_CHECK(object.is_object() && object.contains(key), "{}: missing key '{}'", source, key);
  try {
    return object.at(key).get<T>();
  } catch (const json::exception& e) {
    fail("{}: key '{}' has the wrong type ({}): {}", source, key, object.at(key).type_name(), e.what());
  }
}

json geometry_json(const RunGeometry& g) {
  return {{"world_size", g.world_size},           {"per_rank_batch_size", g.per_rank_batch},
          {"gradient_accumulation_steps", g.accumulation}, {"global_batch_size", g.global_batch()},
          {"shuffle", std::string(data::to_string(g.shuffle))}, {"seed", g.seed},
          {"train_examples", g.train_examples},   {"drop_last", g.drop_last}};
}

RunGeometry geometry_from(const json& j, const std::string& source) {
  RunGeometry g;
  g.world_size = get<int>(j, "world_size", source);
  g.per_rank_batch = get<int64_t>(j, "per_rank_batch_size", source);
  g.accumulation = get<int64_t>(j, "gradient_accumulation_steps", source);
  g.shuffle = data::parse_shuffle_mode(get<std::string>(j, "shuffle", source));
  g.seed = get<uint64_t>(j, "seed", source);
  g.train_examples = get<int64_t>(j, "train_examples", source);
  g.drop_last = get<bool>(j, "drop_last", source);
  HPCTRAIN_CHECK(g.world_size >= 1 && g.per_rank_batch >= 1 && g.accumulation >= 1 && g.train_examples >= 1,
                 "{}: impossible run geometry {}", source, j.dump());
  return g;
}

// The resumed batch geometry: keep the checkpoint's global batch when W or accumulation changed.
void keep_global_batch(const RunGeometry& saved, StartPlan& plan) {
  RunGeometry& g = plan.geometry;
  if (g.global_batch() == saved.global_batch()) return;
  const bool ranks_changed = g.world_size != saved.world_size || g.accumulation != saved.accumulation;
  const int64_t per_step = g.world_size * g.accumulation;
  if (ranks_changed && saved.global_batch() % per_step == 0) {
    plan.notes.push_back(fmt::format("per-rank batch {} -> {} to keep the checkpoint's global batch {} on {} ranks x {} "
                                     "accumulation steps", g.per_rank_batch, saved.global_batch() / per_step,
                                     saved.global_batch(), g.world_size, g.accumulation));
    g.per_rank_batch = saved.global_batch() / per_step;
    return;
  }
  plan.notes.push_back(fmt::format(
      "the global batch changes from {} to {} ({}): steps per epoch and the schedule's total are recomputed; the "
      "data position is kept exactly (the first step after resuming may be partial)", saved.global_batch(),
      g.global_batch(), ranks_changed ? fmt::format("{} is not divisible by {} ranks x {} accumulation steps",
                                                    saved.global_batch(), g.world_size, g.accumulation)
                                      : "--batch-size changed"));
}

void check_position_meaningful(const RunGeometry& saved, const RunGeometry& now, const DataPosition& position) {
  if (position.samples_in_epoch == 0) return;  // an epoch boundary: any geometry may start the next epoch
  HPCTRAIN_CHECK(saved.shuffle == now.shuffle,
                 "the checkpoint stopped in the middle of epoch {} with --shuffle {}; continuing that epoch needs the "
                 "same order\n  hint: resume with --shuffle {}", position.epoch, data::to_string(saved.shuffle),
                 data::to_string(saved.shuffle));
  HPCTRAIN_CHECK(saved.world_size == now.world_size || now.shuffle == data::ShuffleMode::global,
                 "the checkpoint was written by {} ranks with --shuffle {} in the middle of epoch {} ({} of {} samples); "
                 "in that mode every rank's shard changes with the number of ranks, so the rest of the epoch cannot be "
                 "identified on {} ranks\n  hint: resume with {} ranks, or train with --shuffle global, which resumes "
                 "on any number of ranks", saved.world_size, data::to_string(saved.shuffle), position.epoch,
                 position.samples_in_epoch, saved.padded_epoch_size(), now.world_size, saved.world_size);
}

}  // namespace

int64_t RunGeometry::micro_batches_per_epoch() const { return data::batches_per_epoch(sampler_of(*this)); }

int64_t RunGeometry::steps_per_epoch() const {
  return (micro_batches_per_epoch() + accumulation - 1) / accumulation;
}

int64_t RunGeometry::padded_epoch_size() const { return data::examples_per_rank(sampler_of(*this)) * world_size; }

double TrainerState::epoch_float() const {
  const int64_t size = geometry.padded_epoch_size();
  return static_cast<double>(position.epoch) + static_cast<double>(position.samples_in_epoch) / static_cast<double>(size);
}

json to_json(const TrainerState& s) {
  json out = {
      {"best_metric", s.best_metric ? json(*s.best_metric) : json(nullptr)},
      {"best_model_checkpoint", s.best_model_checkpoint.empty() ? json(nullptr) : json(s.best_model_checkpoint)},
      {"epoch", s.epoch_float()},
      {"eval_steps", s.eval_steps},
      {"global_step", s.global_step},
      {"is_hyper_param_search", false},
      {"is_local_process_zero", true},
      {"is_world_process_zero", true},
      {"log_history", s.log_history},
      {"logging_steps", s.logging_steps},
      {"max_steps", s.max_steps},
      {"num_train_epochs", s.num_train_epochs},
      {"save_steps", s.save_steps},
      {"total_flos", 0},
      {"train_batch_size", s.geometry.per_rank_batch},
      {"trial_name", nullptr},
      {"trial_params", nullptr},
  };
  out["hpctrain"] = {
      {"format", 1},
      {"epoch_index", s.position.epoch},
      {"samples_in_epoch", s.position.samples_in_epoch},
      {"samples_seen", s.samples_seen},
      {"skipped_steps", s.skipped_steps},
      {"geometry", geometry_json(s.geometry)},
      {"scheduler", {{"kind", to_string(s.schedule.kind)}, {"base_lr", s.schedule.base_lr},
                     {"warmup_steps", s.schedule.warmup_steps}, {"total_steps", s.schedule.total_steps}}},
      // Note [Dropout seeds]: the RNG state is the seed; every micro-batch reseeds from (seed, step, micro, rank).
      {"rng", {{"seed", s.geometry.seed}, {"scheme", "derive_seed(seed, step, micro_batch, rank) per micro-batch"}}},
  };
  return out;
}

TrainerState trainer_state_from_json(const json& j, const std::string& source) {
  TrainerState s;
  s.global_step = get<int64_t>(j, "global_step", source);
  s.log_history = j.value("log_history", json::array());
  s.max_steps = j.value("max_steps", int64_t{0});
  s.num_train_epochs = j.value("num_train_epochs", int64_t{0});
  s.logging_steps = j.value("logging_steps", int64_t{0});
  s.eval_steps = j.value("eval_steps", int64_t{0});
  s.save_steps = j.value("save_steps", int64_t{0});
  if (j.contains("best_metric") && j["best_metric"].is_number()) s.best_metric = j["best_metric"].get<double>();
  if (j.contains("best_model_checkpoint") && j["best_model_checkpoint"].is_string())
    s.best_model_checkpoint = j["best_model_checkpoint"].get<std::string>();
  HPCTRAIN_CHECK(j.contains("hpctrain"), "{}: no 'hpctrain' object: not written by hpctrain train, so the data position "
                 "is unknown", source);
  const json& h = j["hpctrain"];
  s.position.epoch = get<int64_t>(h, "epoch_index", source);
  s.position.samples_in_epoch = get<int64_t>(h, "samples_in_epoch", source);
  s.samples_seen = get<int64_t>(h, "samples_seen", source);
  s.skipped_steps = h.value("skipped_steps", int64_t{0});
  s.geometry = geometry_from(get<json>(h, "geometry", source), source);
  const json scheduler = get<json>(h, "scheduler", source);
  s.schedule.kind = parse_schedule(get<std::string>(scheduler, "kind", source));
  s.schedule.base_lr = get<double>(scheduler, "base_lr", source);
  s.schedule.warmup_steps = get<int64_t>(scheduler, "warmup_steps", source);
  s.schedule.total_steps = get<int64_t>(scheduler, "total_steps", source);
  HPCTRAIN_CHECK(s.global_step >= 0 && s.position.epoch >= 0 && s.position.samples_in_epoch >= 0,
                 "{}: negative step or position", source);
  return s;
}

StartPlan plan_start(const TrainerState* saved, RunGeometry requested) {
  StartPlan plan;
  plan.geometry = requested;
  if (saved == nullptr) return plan;
  const RunGeometry& old = saved->geometry;
  HPCTRAIN_CHECK(old.train_examples == requested.train_examples,
                 "the checkpoint was trained on a train split of {} examples, this file's has {}: resuming needs the "
                 "same dataset", old.train_examples, requested.train_examples);
  if (requested.seed != old.seed)
    plan.notes.push_back(fmt::format("seed {} from the checkpoint (not {}): the data order and dropout continue", old.seed,
                                     requested.seed));
  plan.geometry.seed = old.seed;
  plan.geometry.drop_last = old.drop_last;
  plan.global_step = saved->global_step;
  plan.position = saved->position;
  const int64_t consumed = plan.position.samples_in_epoch;
  const bool only_padding_left = old.shuffle == data::ShuffleMode::global && consumed >= old.train_examples;
  if (consumed >= old.padded_epoch_size() || only_padding_left) plan.position = DataPosition{plan.position.epoch + 1, 0};
  check_position_meaningful(old, plan.geometry, plan.position);
  keep_global_batch(old, plan);
  if (old.world_size != plan.geometry.world_size)
    plan.notes.push_back(fmt::format("{} ranks (the checkpoint was written by {}): continuing epoch {} at sample {}",
                                     plan.geometry.world_size, old.world_size, plan.position.epoch,
                                     plan.position.samples_in_epoch));
  const int64_t micro_global = plan.geometry.per_rank_batch * plan.geometry.world_size;
  plan.first_batch = plan.position.samples_in_epoch / micro_global;
  return plan;
}

int64_t total_steps(const StartPlan& plan, int64_t epochs, int64_t max_steps) {
  if (max_steps > 0) return max_steps;
  const RunGeometry& g = plan.geometry;
  const int64_t left_in_epoch = g.micro_batches_per_epoch() - plan.first_batch;
  const int64_t steps_left = (left_in_epoch + g.accumulation - 1) / g.accumulation;
  const int64_t full_epochs_after = std::max<int64_t>(0, epochs - plan.position.epoch - 1);
  if (plan.position.epoch >= epochs) return plan.global_step;
  return plan.global_step + steps_left + full_epochs_after * g.steps_per_epoch();
}

bool before_position(const RunGeometry& geometry, int rank, int64_t batch, int64_t row, int64_t samples_in_epoch) {
  const int64_t key = (batch * geometry.per_rank_batch + row) * geometry.world_size + rank;
  return key < samples_in_epoch;
}

}  // namespace hpctrain::train
