// Choosing, verifying and reading the checkpoint a run resumes from (resume_point.hpp,
// Note [Never start over silently]).
#include "hpctrain/train/resume_point.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/json_text.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;

// Every folder named checkpoint-STEP in `output`, complete or not, newest first.
std::vector<CheckpointEntry> checkpoint_folders_newest_first(const fs::path& output) {
  std::vector<CheckpointEntry> found;
  if (!fs::is_directory(output)) return found;
  for (const auto& entry : fs::directory_iterator(output)) {
    const auto step = parse_checkpoint_name(entry.path().filename().string());
    if (step && entry.is_directory()) found.push_back({*step, entry.path(), checkpoint_run_id(entry.path())});
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.step > b.step; });
  return found;
}

// Whether `file` holds a JSON object (a trainer state of a format without run ids), not damaged text.
bool readable_json_object(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return in.good() && nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false).is_object();
}

// Rank 0: the folder --resume names and its trainer_state.json text; {"", ""} to start fresh.
std::pair<fs::path, std::string> pick_checkpoint(const std::string& resume, const fs::path& output, const RunIdentity& run) {
  if (resume != "auto") return {resume, read_verified_state(resume)};
  std::vector<std::string> rejected;
  for (const CheckpointEntry& entry : checkpoint_folders_newest_first(output)) {
    const std::string name = entry.path.filename().string();
    const CheckpointOwner owner = checkpoint_owner(entry.path, run);
    if (owner == CheckpointOwner::other_run) {
      log::info("--resume auto: {} is another run's{}; not considered", name,
                entry.run_id ? fmt::format(" (run {})", *entry.run_id) : " (its trainer_state.json records no run id)");
      continue;
    }
    try {
      std::string text = read_verified_state(entry.path);
      if (!rejected.empty())
        log::warning("--resume auto: resuming from {}, the newest intact checkpoint of run {}; passed over:\n  {}", name,
                     run.run_id, fmt::join(rejected, "\n  "));
      return {entry.path, std::move(text)};
    } catch (const std::exception& e) {
      log::warning("--resume auto: skipping {}: {}", name, e.what());
      rejected.push_back(fmt::format("{}: {}", name, e.what()));
    }
  }
  HPCTRAIN_CHECK(rejected.empty(), "--resume auto: none of the {} checkpoint(s) of run {} in '{}' is intact; refusing to "
                 "start over (Note [Never start over silently]):\n  {}\n  hint: repair or remove them, or resume one "
                 "explicitly with --resume DIR", rejected.size(), run.run_id, output.string(), fmt::join(rejected, "\n  "));
  log::info("--resume auto: no checkpoint of run {} in '{}', starting fresh", run.run_id, output.string());
  return {};
}

}  // namespace

CheckpointOwner checkpoint_owner(const fs::path& dir, const RunIdentity& run) {
  const fs::path state = dir / kTrainerStateName;
  if (const auto id = checkpoint_run_id(dir)) return owns(run, id) ? CheckpointOwner::this_run : CheckpointOwner::other_run;
  // No run id: an older format (a readable trainer_state.json without one), or a damaged or missing state.
  const bool readable = readable_json_object(state);
  if (readable) return owns(run, std::nullopt) ? CheckpointOwner::this_run : CheckpointOwner::other_run;
  if (run.owns_unmarked_checkpoints) return CheckpointOwner::this_run_damaged;
  return another_run_moved_aside(dir.parent_path()) ? CheckpointOwner::other_run : CheckpointOwner::this_run_damaged;
}

std::string read_verified_state(const fs::path& dir) {
  std::string text = read_verified_trainer_state(dir);
  const fs::path file = dir / kTrainerStateName;
  HPCTRAIN_CHECK(!text.empty() || fs::exists(file), "{}: missing: the checkpoint's trainer state (step, data position, "
                 "run id) is gone", file.string());
  (void)trainer_state_from_json(io::parse_json_text(text, file.string()), file.string());
  return text;
}

ResumePoint find_resume_point(dist::Comm& comm, const std::string& resume, const fs::path& output, const RunIdentity& run) {
  std::string dir, text;
  dist::run_collectively(comm, "choosing the checkpoint to resume", [&] {
    if (!comm.is_main_process() || resume.empty()) return;
    auto [picked, state] = pick_checkpoint(resume, output, run);
    dir = picked.string(), text = std::move(state);
  });
  comm.broadcast_string(dir, 0);
  comm.broadcast_string(text, 0);
  ResumePoint point;
  if (dir.empty()) return point;
  point.dir = dir;
  const fs::path file = point.dir / kTrainerStateName;
  point.state = trainer_state_from_json(io::parse_json_text(text, file.string()), file.string());
  return point;
}

}  // namespace hpctrain::train
