// Note [Agreed options] without MPI: what each rank describes, and the message when ranks differ.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include "fixtures.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/train/run_agreement.hpp"

using namespace hpctrain::train;
using trainer_test::Scratch;
using trainer_test::write_tiny_dataset;
namespace fs = std::filesystem;

namespace {

std::string identify_as_text(const std::string& flag, const std::string& text) { return "identity of " + flag + " " + text; }

std::string value_in(const RunDescription& description, const std::string& name) {
  for (const auto& [entry, value] : description)
    if (entry == name) return value;
  return "<absent>";
}

void write(const fs::path& file, const std::string& text) { std::ofstream(file, std::ios::binary) << text; }

}  // namespace

BOOST_AUTO_TEST_SUITE(run_agreement)

BOOST_AUTO_TEST_CASE(the_table_lists_each_flag_once) {
  std::set<std::string> flags;
  for (const OptionField& field : train_option_fields()) BOOST_TEST(flags.insert(field.flag).second, field.flag);
  BOOST_TEST(flags.count("--gradient-accumulation-steps") == 1u);
  BOOST_TEST(flags.count("--collective-timeout") == 1u);
  for (const char* lora : {"--lora-r", "--lora-alpha", "--lora-dropout", "--lora-target-modules", "--lora-modules-to-save",
                           "--merge-lora"})  // Note [LoRA]: every rank must train the same adapters
    BOOST_TEST(std::any_of(train_option_fields().begin(), train_option_fields().end(),
                           [&](const OptionField& f) { return f.flag == std::string(lora) && f.agreement == Agreement::value; }),
               lora);
}

BOOST_AUTO_TEST_CASE(agreed_options_are_described_and_per_rank_ones_are_not) {
  TrainOptions options;
  options.lr = 0.002, options.accelerator.gradient_accumulation_steps = 4, options.shuffle = hpctrain::data::ShuffleMode::global;
  options.model_config = "preset:tiny-bert", options.accelerator.threads = 3, options.accelerator.log_all_ranks = true;
  const RunDescription description = describe_train_options(options, identify_as_text);
  BOOST_TEST(value_in(description, "--lr") == "0.002");
  BOOST_TEST(value_in(description, "--gradient-accumulation-steps") == "4");
  BOOST_TEST(value_in(description, "--shuffle") == "global");
  BOOST_TEST(value_in(description, "--seed") == "42");
  BOOST_TEST(value_in(description, "--grad-reduce-dtype") == "fp32");  // the reducers' wire must agree
  BOOST_TEST(value_in(description, "--model-config") == "identity of --model-config preset:tiny-bert");
  for (const char* absent : {"--threads", "--log-all-ranks", "--no-progress", "--trace-examples", "--output", "--resume", "--data"})
    BOOST_TEST(value_in(description, absent) == "<absent>", absent);
  // Every other member of the table is described.
  std::size_t compared = 0;
  for (const OptionField& field : train_option_fields())
    compared += field.agreement == Agreement::value || field.agreement == Agreement::content ? 1 : 0;
  BOOST_TEST(description.size() == compared - 1);  // --data: add_dataset_identity
}

BOOST_AUTO_TEST_CASE(differences_name_the_option_and_every_ranks_value) {
  const RunDescription a = {{"--lr", "0.001"}, {"--gradient-accumulation-steps", "2"}};
  const RunDescription b = {{"--lr", "0.001"}, {"--gradient-accumulation-steps", "4"}};
  BOOST_TEST(describe_differences({a, a}) == "");
  BOOST_TEST(describe_differences({a, b}) == "--gradient-accumulation-steps differs across ranks: rank 0 has 2, rank 1 has 4");
  BOOST_TEST(describe_differences({a, b, a}) ==
             "--gradient-accumulation-steps differs across ranks: ranks 0, 2 have 2, rank 1 has 4");
  const RunDescription older = {{"--lr", "0.002"}};
  BOOST_TEST(describe_differences({a, older}) == "--lr differs across ranks: rank 0 has 0.001, rank 1 has 0.002\n"
                                                 "--gradient-accumulation-steps differs across ranks: rank 0 has 2, "
                                                 "rank 1 has (not described)");
}

BOOST_AUTO_TEST_CASE(paths_are_compared_by_content_not_text) {
  const Scratch scratch("agreement-paths");
  write(scratch / "a.json", "{\"dim\": 32}"), write(scratch / "b.json", "{\"dim\": 32}"), write(scratch / "c.json", "{\"dim\": 64}");
  BOOST_TEST(path_identity(scratch / "a.json") == path_identity(scratch / "b.json"));
  BOOST_TEST(path_identity(scratch / "a.json") != path_identity(scratch / "c.json"));
  BOOST_TEST(path_identity(scratch / "none") == "missing");
  BOOST_TEST(path_identity("") == "");
  fs::create_directories(scratch / "m1"), fs::create_directories(scratch / "m2");
  fs::copy_file(scratch / "a.json", scratch / "m1" / "config.json"), fs::copy_file(scratch / "c.json", scratch / "m2" / "config.json");
  BOOST_TEST(path_identity(scratch / "m1").find("config.json (11 bytes, sha256:") == 0, path_identity(scratch / "m1"));
  BOOST_TEST(path_identity(scratch / "m1") != path_identity(scratch / "m2"));
}

BOOST_AUTO_TEST_CASE(datasets_are_compared_by_identity) {
  const Scratch scratch("agreement-data");
  write_tiny_dataset(scratch / "a.h5");
  fs::copy_file(scratch / "a.h5", scratch / "copy.h5");
  write_tiny_dataset(scratch / "bigger.h5", 25);
  RunDescription a, copy, bigger;
  add_dataset_identity(a, "--data", hpctrain::data::DatasetReader(scratch / "a.h5"));
  add_dataset_identity(copy, "--data", hpctrain::data::DatasetReader(scratch / "copy.h5"));
  add_dataset_identity(bigger, "--data", hpctrain::data::DatasetReader(scratch / "bigger.h5"));
  BOOST_TEST(describe_differences({a, copy}) == "");
  BOOST_TEST(value_in(a, "--data (splits)") == "train 24, validation 10");
  BOOST_TEST(value_in(a, "--data (label names)") == "red,green,blue");
  const std::string differences = describe_differences({a, bigger});
  BOOST_TEST(differences.find("--data (splits) differs across ranks: rank 0 has train 24, validation 10, rank 1 has "
                              "train 25, validation 10") != std::string::npos, differences);
  BOOST_TEST(differences.find("--data (content digest) differs") != std::string::npos, differences);
}

BOOST_AUTO_TEST_SUITE_END()
