// Checkpoint folders: atomic publication, listing, rotation of own checkpoints, tensor files, strict copies.
#include <boost/test/unit_test.hpp>

#include <ATen/ATen.h>

#include "fixtures.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/ddp/consistency.hpp"
#include "hpctrain/io/atomic_write.hpp"
#include "hpctrain/models/tensor_io.hpp"
#include "hpctrain/train/checkpoint.hpp"

using namespace hpctrain;
using namespace hpctrain::train;
using models::TensorMap;
using trainer_test::Scratch;
namespace fs = std::filesystem;

namespace {

void make_checkpoint(const fs::path& output, int64_t step, const std::string& run_id = "") {
  io::write_folder_atomically(output / checkpoint_name(step), [&](const fs::path& tmp) {
    write_text(tmp / kTrainerStateName, run_id.empty() ? "{}" : R"({"hpctrain": {"run_id": ")" + run_id + "\"}}");
    write_text(tmp / "model.safetensors", "x");
  });
}

const OwnedBy kAll = [](const std::optional<std::string>&) { return true; };

bool has_hidden_entries(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().front() == '.') return true;
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(names_parse_back_and_reject_others) {
  BOOST_TEST(checkpoint_name(120) == "checkpoint-120");
  BOOST_TEST(*parse_checkpoint_name("checkpoint-120") == 120);
  for (const char* bad : {"checkpoint-", "checkpoint-12a", "checkpoint--1", "final", ".checkpoint-3.tmp-1"})
    BOOST_TEST(!parse_checkpoint_name(bad).has_value(), bad);
}

BOOST_AUTO_TEST_CASE(folders_appear_complete_or_not_at_all) {
  Scratch scratch("atomic");
  const fs::path output = scratch / "run";
  make_checkpoint(output, 5);
  BOOST_TEST(fs::is_regular_file(output / "checkpoint-5" / kTrainerStateName));
  // A failing writer leaves neither the folder nor a temporary.
  BOOST_CHECK_THROW(io::write_folder_atomically(output / "checkpoint-6",
                                            [](const fs::path& tmp) {
                                              write_text(tmp / "model.safetensors", "half");
                                              fail("disk full");
                                            }),
                    Error);
  BOOST_TEST(!fs::exists(output / "checkpoint-6"));
  BOOST_TEST(!has_hidden_entries(output));
  // Replacing an existing checkpoint keeps the old one intact when the new one fails.
  BOOST_CHECK_THROW(io::write_folder_atomically(output / "checkpoint-5", [](const fs::path&) { fail("boom"); }), Error);
  BOOST_TEST(fs::is_regular_file(output / "checkpoint-5" / kTrainerStateName));
}

BOOST_AUTO_TEST_CASE(listing_ignores_temporaries_and_incomplete_folders) {
  Scratch scratch("list");
  const fs::path output = scratch / "run";
  for (int64_t step : {10, 2, 30}) make_checkpoint(output, step);
  fs::create_directories(output / ".checkpoint-40.tmp-123");
  fs::create_directories(output / "checkpoint-50");  // no trainer_state.json: copied half-way by someone
  fs::create_directories(output / "final");
  const auto found = list_checkpoints(output);
  BOOST_TEST_REQUIRE(found.size() == 3u);
  BOOST_TEST(found[0].step == 2);
  BOOST_TEST(found[2].step == 30);
  BOOST_TEST(!found[2].run_id.has_value());  // "{}": no run id recorded
  BOOST_TEST(list_checkpoints(scratch / "missing").empty());
  remove_stale_temporaries(output);
  BOOST_TEST(!fs::exists(output / ".checkpoint-40.tmp-123"));
}

BOOST_AUTO_TEST_CASE(rotation_keeps_the_newest) {
  Scratch scratch("rotate");
  const fs::path output = scratch / "run";
  for (int64_t step : {1, 2, 3, 4}) make_checkpoint(output, step);
  BOOST_TEST(rotate_checkpoints(output, 0, kAll).empty());
  const auto removed = rotate_checkpoints(output, 2, kAll);
  BOOST_TEST(removed.size() == 2u);
  const auto left = list_checkpoints(output);
  BOOST_TEST_REQUIRE(left.size() == 2u);
  BOOST_TEST(left[0].step == 3);
  BOOST_TEST(!has_hidden_entries(output));
}

BOOST_AUTO_TEST_CASE(rotation_counts_and_removes_only_this_runs_checkpoints) {
  Scratch scratch("rotate-own");
  const fs::path output = scratch / "run";
  for (int64_t step : {10, 20, 30}) make_checkpoint(output, step, "old");
  for (int64_t step : {1, 2, 3}) make_checkpoint(output, step, "new");
  make_checkpoint(output, 40);  // no run id
  BOOST_TEST(list_checkpoints(output).at(5).run_id.value_or("") == "old");  // checkpoint-30
  const OwnedBy mine = [](const std::optional<std::string>& id) { return id && *id == "new"; };
  const auto removed = rotate_checkpoints(output, 1, mine);
  BOOST_TEST(removed.size() == 2u);
  std::vector<int64_t> left;
  for (const auto& entry : list_checkpoints(output)) left.push_back(entry.step);
  BOOST_TEST(left == (std::vector<int64_t>{3, 10, 20, 30, 40}), boost::test_tools::per_element());
  BOOST_TEST(own_checkpoints(output, mine).size() == 1u);
}

BOOST_AUTO_TEST_CASE(move_aside_keeps_the_extension_and_refuses_to_clobber) {
  Scratch scratch("aside");
  write_text(scratch / "metrics.jsonl", "{}\n");
  BOOST_TEST(move_aside(scratch / "metrics.jsonl", "abc").filename() == "metrics.run-abc.jsonl");
  make_checkpoint(scratch.dir(), 4);
  BOOST_TEST(move_aside(scratch / "checkpoint-4", "abc").filename() == "checkpoint-4.run-abc");
  BOOST_TEST(list_checkpoints(scratch.dir()).empty());
  make_checkpoint(scratch.dir(), 4);
  BOOST_CHECK_THROW((void)move_aside(scratch / "checkpoint-4", "abc"), Error);
  BOOST_TEST(fs::exists(scratch / "checkpoint-4"));
}

BOOST_AUTO_TEST_CASE(tensor_files_round_trip_and_broadcast_identity) {
  Scratch scratch("tensors");
  TensorMap tensors{{"exp_avg.w", at::randn({3, 4})}, {"step", at::scalar_tensor(7, at::kLong)},
                    {"half", at::randn({5}).to(at::kHalf)}};
  models::save_tensor_file(scratch / "opt.safetensors", tensors);
  const TensorMap back = models::load_tensor_file(scratch / "opt.safetensors");
  BOOST_TEST_REQUIRE(back.size() == 3u);
  BOOST_TEST(at::equal(back.at("exp_avg.w"), tensors.at("exp_avg.w")));
  BOOST_TEST(back.at("step").item<int64_t>() == 7);
  BOOST_TEST(back.at("half").scalar_type() == at::kHalf);
  auto comm = dist::make_single_process_comm();
  const TensorMap received = ddp::broadcast_tensors(*comm, back, 0);
  BOOST_TEST(at::equal(received.at("exp_avg.w"), tensors.at("exp_avg.w")));
}

BOOST_AUTO_TEST_CASE(strict_copy_names_every_problem) {
  const TensorMap target{{"a", at::zeros({2})}, {"b", at::zeros({3})}, {"c", at::zeros({1})}};
  const TensorMap source{{"a", at::ones({2})}, {"b", at::ones({4})}, {"d", at::ones({1})}};
  try {
    models::copy_tensors_strict(source, target, "weights in X");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* part : {"weights in X", "missing 'c'", "'b' has shape [4], expected [3]", "unexpected 'd'"})
      BOOST_TEST(message.find(part) != std::string::npos, part << " in: " << message);
  }
  BOOST_TEST(target.at("a").sum().item<double>() == 0.0);  // nothing copied on error
  models::copy_tensors_strict(TensorMap{{"a", at::ones({2})}}, TensorMap{{"a", target.at("a")}}, "ok");
  BOOST_TEST(target.at("a").sum().item<double>() == 2.0);
}

BOOST_AUTO_TEST_SUITE_END()
