// Run identity, the run folder lock and the reuse rule (run_folder.hpp, Note [One run per folder]).
#include "hpctrain/train/run_folder.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/log.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/train/checkpoint.hpp"

namespace hpctrain::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string describe_holder(const fs::path& lock_path) {
  std::string text;
  try {
    text = read_text(lock_path);
  } catch (const Error&) {
  }
  const json holder = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!holder.is_object()) return "unknown holder";
  return fmt::format("host {}, pid {}, since {}", holder.value("host", "?"), holder.value("pid", int64_t{0}),
                     holder.value("started", "?"));
}

std::optional<RunIdentity> read_identity(const fs::path& output) {
  const fs::path file = output / kRunIdentityName;
  if (!fs::exists(file)) return std::nullopt;
  const std::string text = read_text(file);
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(!parsed.is_discarded(), "{}: not valid JSON (truncated?); expected the run identity hpctrain wrote",
                 file.string());
  return run_identity_from_json(parsed, file.string());
}

// --overwrite-output-dir: the old run's outputs (Note [Run outputs]) get NAME.run-OLDID; its checkpoints stay.
void move_old_run_aside(const fs::path& output, const std::string& old_id, const std::vector<std::string>& extra,
                        std::vector<std::string>& notes) {
  std::vector<std::string> names(std::begin(kRunOutputs), std::end(kRunOutputs));
  names.insert(names.end(), extra.begin(), extra.end());
  for (const std::string& name : names) {
    if (!fs::exists(fs::symlink_status(output / name))) continue;
    const fs::path aside = move_aside(output / name, old_id);
    notes.push_back(fmt::format("--overwrite-output-dir: the previous run's {} is now {}", name, aside.filename().string()));
  }
}

// Whether `inner` is `outer` or lies inside it, both resolved.
bool inside(const fs::path& inner, const fs::path& outer) {
  const fs::path a = fs::weakly_canonical(inner), b = fs::weakly_canonical(outer);
  auto ai = a.begin();
  for (auto bi = b.begin(); bi != b.end(); ++bi, ++ai) {
    if (bi->empty()) continue;  // a trailing separator
    if (ai == a.end() || *ai != *bi) return false;
  }
  return true;
}

std::string refusal(const fs::path& output, const std::vector<std::string>& files, const std::optional<RunIdentity>& old) {
  const std::string whose = old ? fmt::format("run {} started {} on {}", old->run_id, old->started, old->host)
                                : std::string("a run from before run ids");
  return fmt::format("--output '{}' holds another run's files ({}; {}): refusing to overwrite them\n  hint: --resume "
                     "auto continues that run; --overwrite-output-dir starts a new run in the folder (the old run's "
                     "files are kept under NAME.run-ID names); or choose another --output", output.string(),
                     fmt::join(files, ", "), whose);
}

RunFolder claim_on_root(const fs::path& output, const FolderClaim& claim) {
  fs::create_directories(output);
  RunFolder folder;
  const RunIdentity fresh = new_run_identity();
  folder.lock = std::make_unique<RunFolderLock>(output, fresh);
  const std::vector<std::string> previous = previous_run_files(output);
  const std::optional<RunIdentity> old = read_identity(output);
  const bool resume = !claim.resume.empty();
  const auto resume_run_id = resume && claim.resume != "auto" ? checkpoint_run_id(claim.resume) : std::nullopt;
  folder.identity = fresh;
  if (resume_run_id) folder.identity.run_id = *resume_run_id;  // continue the checkpoint's run
  if (previous.empty()) return folder;
  if (claim.overwrite) {
    folder.identity.run_id = fresh.run_id;
    move_old_run_aside(output, old ? old->run_id : "unnamed-" + fresh.run_id.substr(0, 8), claim.extra_outputs,
                       folder.notes);
  } else if (resume && old) {
    HPCTRAIN_CHECK(!resume_run_id || *resume_run_id == old->run_id,
                   "--resume: the checkpoint belongs to run {}, but --output '{}' holds run {}\n  hint: give the "
                   "checkpoint's own run folder as --output, or pass --overwrite-output-dir", *resume_run_id,
                   output.string(), old->run_id);
    folder.identity.run_id = old->run_id, folder.identity.started = old->started;
    folder.identity.owns_unmarked_checkpoints = old->owns_unmarked_checkpoints;
  } else if (resume) {
    folder.identity.owns_unmarked_checkpoints = true;
    folder.notes.push_back(fmt::format("--resume: adopting '{}' (no {}: written before run ids) as run {}",
                                       output.string(), kRunIdentityName, folder.identity.run_id));
  } else {
    fail("{}", refusal(output, previous, old));
  }
  return folder;
}

}  // namespace

RunIdentity new_run_identity() {
  std::random_device device;
  RunIdentity identity;
  for (int i = 0; i < 4; ++i) identity.run_id += fmt::format("{:08x}", device());
  identity.started = utc_now();
  identity.host = host_name();
  identity.pid = static_cast<int64_t>(::getpid());
  return identity;
}

json to_json(const RunIdentity& r) {
  return {{"format", 1}, {"run_id", r.run_id}, {"started", r.started}, {"host", r.host}, {"pid", r.pid},
          {"owns_unmarked_checkpoints", r.owns_unmarked_checkpoints}};
}

RunIdentity run_identity_from_json(const json& j, const std::string& source) {
  HPCTRAIN_CHECK(j.is_object() && j.contains("run_id") && j["run_id"].is_string() && !j["run_id"].get<std::string>().empty(),
                 "{}: field 'run_id': expected a non-empty string", source);
  RunIdentity r;
  r.run_id = j["run_id"].get<std::string>();
  HPCTRAIN_CHECK(r.run_id.find_first_of("/\\. ") == std::string::npos, "{}: field 'run_id' '{}': expected letters and "
                 "digits", source, r.run_id);
  r.started = j.contains("started") && j["started"].is_string() ? j["started"].get<std::string>() : "";
  r.host = j.contains("host") && j["host"].is_string() ? j["host"].get<std::string>() : "";
  r.pid = j.contains("pid") && j["pid"].is_number_integer() ? j["pid"].get<int64_t>() : 0;
  r.owns_unmarked_checkpoints = j.value("owns_unmarked_checkpoints", false);
  return r;
}

bool another_run_moved_aside(const fs::path& output) {
  if (!fs::is_directory(output)) return false;
  for (const auto& entry : fs::directory_iterator(output)) {
    const std::string name = entry.path().filename().string();
    for (const char* file : kRunOutputs)
      if (name.rfind(fs::path(file).stem().string() + ".run-", 0) == 0) return true;
  }
  return false;
}

bool is_run_output(const std::string& name, const std::vector<std::string>& extra) {
  if (name == kRunLockName || parse_checkpoint_name(name)) return true;
  for (const char* output : kRunOutputs)
    if (name == output) return true;
  return std::find(extra.begin(), extra.end(), name) != extra.end();
}

void check_run_inputs(const fs::path& output, const std::vector<RunInput>& inputs,
                      const std::vector<std::string>& extra_outputs, const fs::path& resume_checkpoint) {
  std::vector<std::string> names(std::begin(kRunOutputs), std::end(kRunOutputs));
  names.insert(names.end(), extra_outputs.begin(), extra_outputs.end());
  for (const RunInput& input : inputs) {
    if (input.path.empty()) continue;
    for (const std::string& name : names)
      HPCTRAIN_CHECK(!inside(input.path, output / name), "{} '{}' lies in '{}', which this run writes (--output '{}'): "
                     "refusing to read an input the run would replace or move aside\n  hint: copy it out of the "
                     "run folder first, or choose another --output", input.option, input.path.string(),
                     (output / name).string(), output.string());
    if (!fs::is_directory(output)) continue;
    for (const auto& entry : fs::directory_iterator(output)) {
      const std::string name = entry.path().filename().string();
      if (!parse_checkpoint_name(name) || !entry.is_directory()) continue;
      if (!resume_checkpoint.empty() && inside(resume_checkpoint, entry.path())) continue;  // --resume reads its own
      HPCTRAIN_CHECK(!inside(input.path, entry.path()), "{} '{}' lies in the checkpoint '{}', which this run may "
                     "replace, move aside or rotate away (--output '{}')\n  hint: copy it out of the run folder first, "
                     "or choose another --output", input.option, input.path.string(), entry.path().string(),
                     output.string());
    }
  }
}

bool owns(const RunIdentity& identity, const std::optional<std::string>& checkpoint_run_id) {
  if (!checkpoint_run_id) return identity.owns_unmarked_checkpoints;
  return *checkpoint_run_id == identity.run_id;
}

std::vector<std::string> previous_run_files(const fs::path& output) {
  std::vector<std::string> names;
  if (!fs::is_directory(output)) return names;
  for (const auto& entry : fs::directory_iterator(output)) {
    const std::string name = entry.path().filename().string();
    const bool belongs = name != kRunLockName && is_run_output(name) && (!parse_checkpoint_name(name) || entry.is_directory());
    if (belongs) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

RunFolderLock::RunFolderLock(const fs::path& output, const RunIdentity& holder) {
  const fs::path path = output / kRunLockName;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  HPCTRAIN_CHECK(fd_ >= 0, "cannot open the lock file '{}': {}", path.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int saved = errno;
    if (saved == ENOSYS || saved == EOPNOTSUPP || saved == ENOLCK || saved == EINVAL) {  // e.g. Lustre without -o flock
      log::warning("'{}': the file system does not support flock ({}): a concurrent run on this --output is not "
                   "detected", path.string(), std::strerror(saved));
      return;
    }
    ::close(fd_);
    fd_ = -1;
    HPCTRAIN_CHECK(saved != EWOULDBLOCK, "--output '{}' is in use by another run ({}): '{}' is locked\n  hint: wait for "
                   "that run to end, or choose another --output", output.string(), describe_holder(path), path.string());
    fail("cannot lock '{}': {}", path.string(), std::strerror(saved));
  }
  const std::string text = json{{"host", holder.host}, {"pid", holder.pid}, {"started", holder.started}}.dump() + "\n";
  // Best effort: the holder's description for a refused second run; the lock itself is what counts.
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, text.data(), text.size(), 0);
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

RunFolder claim_run_folder(dist::Comm& comm, const fs::path& output, const FolderClaim& claim) {
  RunFolder folder;
  dist::run_collectively(comm, fmt::format("claiming the run folder '{}'", output.string()), [&] {
    if (!comm.is_main_process()) return;
    folder = claim_on_root(output, claim);
    io::write_file_atomically(output / kRunIdentityName, to_json(folder.identity).dump(2) + "\n");
  });
  std::string identity = comm.is_main_process() ? to_json(folder.identity).dump() : "";
  comm.broadcast_string(identity, 0);
  if (!comm.is_main_process()) folder.identity = run_identity_from_json(json::parse(identity), "rank 0's run identity");
  return folder;
}

}  // namespace hpctrain::train
