// --max-time and the job's end time: when a run stops early to save a checkpoint before its time runs out.
// All times in seconds, counted from the start of run_training (set-up included). Pure functions.
#pragma once

#include <optional>
#include <string>

namespace hpctrain::train {

// --max-time: "HH:MM:SS" (hours may exceed 24) or plain seconds ("3600", "90.5"); > 0. Error naming `flag`.
[[nodiscard]] double parse_duration(const std::string& text, const char* flag = "--max-time");

// The run's time budget: the smaller of --max-time (max_time <= 0: none) and the job's end time
// (SLURM_JOB_END_TIME, epoch seconds, set by Slurm 23.02 and later; "" or nullptr: none) less
// `now_epoch`, the wall-clock time at the start. Infinity when neither is set. Error naming the variable
// when it is not a number.
[[nodiscard]] double time_budget(double max_time, const char* slurm_job_end_time, double now_epoch);

// squeue's "%L" (time left of a job): "[D-]HH:MM:SS", "MM:SS" or "SS" -> seconds; nullopt for "UNLIMITED",
// "NOT_SET", "INVALID" or anything else.
[[nodiscard]] std::optional<double> parse_slurm_time_left(const std::string& text);

// Under Slurm without SLURM_JOB_END_TIME (Slurm before 23.02, e.g. Debian 12's 22.05): the job's time left
// from `squeue -h -j $SLURM_JOB_ID -o %L`, run once; nullopt outside a job, with SLURM_JOB_END_TIME set, or
// when squeue fails or the job has no limit. Not pure (runs squeue): call it on one rank.
[[nodiscard]] std::optional<double> slurm_time_left();

// What the next stop decision needs, measured by this rank.
struct StopMargin {
  double longest_step = 0;  // longest optimizer step so far
  double last_save = 0;     // duration of the last checkpoint save (0: none yet)
  double minimum = 5;       // never less than this
  [[nodiscard]] double seconds() const;
};

// Stop now (finish this step, save) when what is left of `budget` after `elapsed` does not cover another
// step and a save: elapsed + margin >= budget.
[[nodiscard]] bool time_to_stop(double elapsed, double budget, const StopMargin& margin);

}  // namespace hpctrain::train
