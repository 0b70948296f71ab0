// trainer_state.json and plan_start (trainer_state.hpp, Note [Resume position]).
#include "hpctrain/train/trainer_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "hpctrain/core/error.hpp"

namespace hpctrain::train {
namespace {

using nlohmann::json;

constexpr int64_t kMaxCount = int64_t{1} << 53;  // counts (steps, samples) a double still represents exactly

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

// Strict field readers: Error naming `source` (the file), the field's path, the expected and the actual value.
const json& field(const json& object, const char* key, const std::string& path, const std::string& source) {
  HPCTRAIN_CHECK(object.is_object() && object.contains(key), "{}: missing field '{}'", source, path);
  return object.at(key);
}

int64_t get_int(const json& object, const char* key, const std::string& source, int64_t min, int64_t max,
                const std::string& prefix = "") {
  const std::string path = prefix + key;
  const json& value = field(object, key, path, source);
  HPCTRAIN_CHECK(value.is_number_integer(), "{}: field '{}' has type {} ({}), expected an integer", source, path,
                 value.type_name(), value.dump());
  // An unsigned value above INT64_MAX reads as negative here and fails the range check.
  const int64_t number = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                             ? -1 : value.get<int64_t>();
  HPCTRAIN_CHECK(number >= min && number <= max, "{}: field '{}' is {}, expected {} <= value <= {}", source, path,
                 value.dump(), min, max);
  return number;
}

int64_t get_int_or(const json& object, const char* key, const std::string& source, int64_t fallback) {
  if (!object.contains(key) || object[key].is_null()) return fallback;
  return get_int(object, key, source, 0, kMaxCount);
}

template <typename T>
T get(const json& object, const char* key, const std::string& source, const std::string& prefix = "") {
  const json& value = field(object, key, prefix + key, source);
  try {
    return value.get<T>();
  } catch (const json::exception& e) {
    fail("{}: field '{}' has the wrong type ({}): {}", source, prefix + key, value.type_name(), e.what());
  }
}

double get_number(const json& object, const char* key, const std::string& source, const std::string& prefix = "") {
  const json& value = field(object, key, prefix + key, source);
  HPCTRAIN_CHECK(value.is_number() && std::isfinite(value.get<double>()), "{}: field '{}' is {} ({}), expected a finite "
                 "number", source, prefix + key, value.dump(), value.type_name());
  return value.get<double>();
}

json geometry_json(const RunGeometry& g) {
  return {{"world_size", g.world_size},           {"per_rank_batch_size", g.per_rank_batch},
          {"gradient_accumulation_steps", g.accumulation}, {"global_batch_size", g.global_batch()},
          {"shuffle", std::string(data::to_string(g.shuffle))}, {"seed", g.seed},
          {"train_examples", g.train_examples},   {"drop_last", g.drop_last}};
}

RunGeometry geometry_from(const json& j, const std::string& source) {
  const std::string at = "hpctrain.geometry.";
  RunGeometry g;
  g.world_size = static_cast<int>(get_int(j, "world_size", source, 1, 1 << 24, at));
  g.per_rank_batch = get_int(j, "per_rank_batch_size", source, 1, kMaxCount, at);
  g.accumulation = get_int(j, "gradient_accumulation_steps", source, 1, kMaxCount, at);
  g.shuffle = data::parse_shuffle_mode(get<std::string>(j, "shuffle", source, at));
  const json& seed = field(j, "seed", at + "seed", source);
  HPCTRAIN_CHECK(seed.is_number_unsigned(), "{}: field '{}seed' is {}, expected an integer >= 0", source, at, seed.dump());
  g.seed = seed.get<uint64_t>();
  g.train_examples = get_int(j, "train_examples", source, 1, kMaxCount, at);
  g.drop_last = get<bool>(j, "drop_last", source, at);
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
      {"run_id", s.run_id},
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

namespace {

void read_position(const json& h, const std::string& source, TrainerState& s) {
  const std::string at = "hpctrain.";
  s.position.epoch = get_int(h, "epoch_index", source, 0, s.global_step, at);  // every epoch takes >= 1 step
  s.position.samples_in_epoch = get_int(h, "samples_in_epoch", source, 0, s.geometry.padded_epoch_size(), at);
  s.samples_seen = get_int(h, "samples_seen", source, 0, kMaxCount, at);
  s.skipped_steps = h.contains("skipped_steps") ? get_int(h, "skipped_steps", source, 0, s.global_step, at) : 0;
}

void read_schedule(const json& h, const std::string& source, TrainerState& s) {
  const std::string at = "hpctrain.scheduler.";
  const json& scheduler = field(h, "scheduler", "hpctrain.scheduler", source);
  s.schedule.kind = parse_schedule(get<std::string>(scheduler, "kind", source, at));
  s.schedule.base_lr = get_number(scheduler, "base_lr", source, at);
  s.schedule.warmup_steps = get_int(scheduler, "warmup_steps", source, 0, kMaxCount, at);
  s.schedule.total_steps = get_int(scheduler, "total_steps", source, 0, kMaxCount, at);
}

// The fields Hugging Face's Trainer reads too; `epoch` must agree with hpctrain's exact position.
void read_hf_fields(const json& j, const std::string& source, TrainerState& s) {
  s.max_steps = get_int_or(j, "max_steps", source, 0);
  s.global_step = get_int(j, "global_step", source, 0, kMaxCount);
  HPCTRAIN_CHECK(s.max_steps == 0 || s.global_step <= s.max_steps, "{}: field 'global_step' {} is beyond max_steps {}",
                 source, s.global_step, s.max_steps);
  s.num_train_epochs = get_int_or(j, "num_train_epochs", source, 0);
  s.logging_steps = get_int_or(j, "logging_steps", source, 0);
  s.eval_steps = get_int_or(j, "eval_steps", source, 0);
  s.save_steps = get_int_or(j, "save_steps", source, 0);
  s.log_history = j.value("log_history", json::array());
  HPCTRAIN_CHECK(s.log_history.is_array(), "{}: field 'log_history' is {}, expected an array", source,
                 s.log_history.type_name());
  if (j.contains("best_metric") && !j["best_metric"].is_null()) s.best_metric = get_number(j, "best_metric", source);
  if (j.contains("best_model_checkpoint") && j["best_model_checkpoint"].is_string())
    s.best_model_checkpoint = j["best_model_checkpoint"].get<std::string>();
}

}  // namespace

TrainerState trainer_state_from_json(const json& j, const std::string& source) {
  HPCTRAIN_CHECK(j.is_object(), "{}: expected a JSON object, got {}", source, j.type_name());
  TrainerState s;
  read_hf_fields(j, source, s);
  HPCTRAIN_CHECK(j.contains("hpctrain"), "{}: no 'hpctrain' object: not written by hpctrain train, so the data position "
                 "is unknown", source);
  const json& h = j["hpctrain"];
  HPCTRAIN_CHECK(h.is_object(), "{}: field 'hpctrain' is {}, expected an object", source, h.type_name());
  if (h.contains("run_id")) s.run_id = get<std::string>(h, "run_id", source, "hpctrain.");
  s.geometry = geometry_from(field(h, "geometry", "hpctrain.geometry", source), source);
  read_position(h, source, s);
  read_schedule(h, source, s);
  const double epoch = get_number(j, "epoch", source);
  HPCTRAIN_CHECK(std::abs(epoch - s.epoch_float()) <= 1e-6 * std::max(1.0, epoch), "{}: field 'epoch' is {}, but "
                 "hpctrain.epoch_index {} and samples_in_epoch {} of {} give {}", source, j["epoch"].dump(),
                 s.position.epoch, s.position.samples_in_epoch, s.geometry.padded_epoch_size(), s.epoch_float());
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
