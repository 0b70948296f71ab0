// A run folder belongs to one run (Note [One run per folder]): identity, lock, reuse rule, single process.
#include <boost/test/unit_test.hpp>

#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/train/checkpoint.hpp"
#include "hpctrain/train/run_folder.hpp"

using namespace hpctrain;
using namespace hpctrain::train;
using trainer_test::Scratch;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

RunFolder claim(const fs::path& output, const std::string& resume = "", bool overwrite = false) {
  auto comm = dist::make_single_process_comm();
  return claim_run_folder(*comm, output, FolderClaim{resume, overwrite});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(run_folder)

BOOST_AUTO_TEST_CASE(identities_are_random_and_round_trip) {
  const RunIdentity a = new_run_identity(), b = new_run_identity();
  BOOST_TEST(a.run_id.size() == 32u);
  BOOST_TEST(a.run_id != b.run_id);
  const RunIdentity back = run_identity_from_json(to_json(a), "run.json");
  BOOST_TEST(back.run_id == a.run_id);
  BOOST_TEST(back.host == a.host);
  BOOST_TEST(back.pid == a.pid);
  BOOST_TEST(has(error_of([] { (void)run_identity_from_json({{"run_id", "../x"}}, "o/run.json"); }), "o/run.json"));
}

BOOST_AUTO_TEST_CASE(ownership_of_checkpoints) {
  RunIdentity run = new_run_identity();
  BOOST_TEST(owns(run, run.run_id));
  BOOST_TEST(!owns(run, std::string("other")));
  BOOST_TEST(!owns(run, std::nullopt));
  run.owns_unmarked_checkpoints = true;
  BOOST_TEST(owns(run, std::nullopt));
}

BOOST_AUTO_TEST_CASE(previous_run_files_ignores_the_lock_and_foreign_names) {
  Scratch scratch("previous");
  BOOST_TEST(previous_run_files(scratch / "missing").empty());
  write_text(scratch / kRunLockName, "");
  write_text(scratch / "notes.txt", "");
  BOOST_TEST(previous_run_files(scratch.dir()).empty());
  write_text(scratch / "metrics.jsonl", "");
  fs::create_directories(scratch / "checkpoint-5");
  fs::create_directories(scratch / "final");
  BOOST_TEST(previous_run_files(scratch.dir()) == (std::vector<std::string>{"checkpoint-5", "final", "metrics.jsonl"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_used_folder_is_refused_resumed_or_taken_over) {
  Scratch scratch("claim");
  const fs::path output = scratch / "run";
  std::string first_id;
  {
    const RunFolder first = claim(output);
    first_id = first.identity.run_id;
    BOOST_TEST(fs::is_regular_file(output / kRunIdentityName));
    // Another claim while the first holds the lock (a second open file description: flock conflicts).
    BOOST_TEST(has(error_of([&] { (void)claim(output); }), "is in use by another run"));
    BOOST_TEST(has(error_of([&] { (void)claim(output, "", true); }), "pid"));
  }
  write_text(output / "metrics.jsonl", "{}\n");
  const std::string refused = error_of([&] { (void)claim(output); });
  BOOST_TEST(has(refused, "holds another run's files (metrics.jsonl, run.json; run " + first_id), refused);
  BOOST_TEST(has(refused, "--overwrite-output-dir"));
  BOOST_TEST(claim(output, "auto").identity.run_id == first_id);  // resume continues the run
  const RunFolder taken = claim(output, "", true);
  BOOST_TEST(taken.identity.run_id != first_id);
  BOOST_TEST(fs::is_regular_file(output / ("metrics.run-" + first_id + ".jsonl")));
  BOOST_TEST(fs::is_regular_file(output / ("run.run-" + first_id + ".json")));
  BOOST_TEST(!fs::exists(output / "metrics.jsonl"));
}

BOOST_AUTO_TEST_CASE(resume_adopts_a_folder_from_before_run_ids) {
  Scratch scratch("adopt");
  const fs::path output = scratch / "run";
  fs::create_directories(output / "checkpoint-2");
  write_text(output / "checkpoint-2" / kTrainerStateName, "{}");
  BOOST_TEST(has(error_of([&] { (void)claim(output); }), "a run from before run ids"));
  const RunFolder adopted = claim(output, "auto");
  BOOST_TEST(adopted.identity.owns_unmarked_checkpoints);
  BOOST_TEST(owns(adopted.identity, checkpoint_run_id(output / "checkpoint-2")));
  BOOST_TEST(!adopted.notes.empty());
}

// Note [Run outputs]: an input inside what the run writes is refused, however it is spelled.
BOOST_AUTO_TEST_CASE(inputs_inside_the_run_outputs_are_refused) {
  Scratch scratch("inputs");
  const fs::path out = scratch / "out";
  fs::create_directories(out / "final-merged");
  fs::create_directories(out / "checkpoint-3");
  fs::create_directory_symlink(out / "final-merged", scratch / "link");
  const auto refused = [&](const fs::path& model, const fs::path& resume = {}) {
    try {
      check_run_inputs(out, {{"--model", model}}, {"timeline.json"}, resume);
    } catch (const hpctrain::Error& error) {
      return std::string(error.what()).find("--model '" + model.string() + "' lies in") != std::string::npos;
    }
    return false;
  };
  BOOST_TEST(refused(out / "final-merged"));
  BOOST_TEST(refused(scratch / "link"));                                 // through a symlink
  BOOST_TEST(refused(out / "checkpoint-3" / ".." / "final-merged"));     // another spelling
  BOOST_TEST(refused(out / "final"));                                    // not there yet, written by the run
  BOOST_TEST(refused(out / "timeline.json"));                            // the user's output in OUTPUT
  BOOST_TEST(refused(out / "checkpoint-3"));                             // may be replaced or rotated
  BOOST_TEST(!refused(out / "checkpoint-3", out / "checkpoint-3"));      // what --resume reads
  BOOST_TEST(!refused(out));                                             // a model folder used as OUTPUT itself
  BOOST_TEST(!refused(scratch / "final-merged"));                        // a name alike, elsewhere
  BOOST_TEST(is_run_output("final-merged"));
  BOOST_TEST(is_run_output("checkpoint-12"));
  BOOST_TEST(!is_run_output("notes.txt"));
  BOOST_TEST(is_run_output("notes.txt", {"notes.txt"}));
}

BOOST_AUTO_TEST_SUITE_END()
