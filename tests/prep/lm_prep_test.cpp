// prep_lm in one process on the golden byte-level BPE tokenizers: the rows are the documents' ids (the
// tokenizer's, then EOS) packed or cut, with their source rows; the file reads back as task causal-lm.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../data/fixtures.hpp"
#include "../error_capture.hpp"
#include <nlohmann/json.hpp>

#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/prep/dataset_summary.hpp"
#include "hpctrain/prep/lm_prep.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"

using namespace hpctrain;
using sources_test::TempDir;
using sources_test::write_file;
namespace fs = std::filesystem;

namespace {

using Ids = std::vector<int32_t>;

fs::path tokenizer_dir(const char* name) { return fs::path(HPCTRAIN_TEST_DATA_DIR) / "tokenize/golden/bpe" / name; }

const std::vector<std::string> kDocuments = {
    "The quick brown fox jumps over the lazy dog.", "Hello world", "Ünïcödé text, with 数字 123 and emoji 🎉.",
    "A much longer document that spans several rows of a small block size when it is packed with the others.",
    "short", "Another line\nwith a newline inside.", "x"};

std::string jsonl(const std::vector<std::string>& texts) {
  std::string out;
  for (const auto& text : texts) out += nlohmann::json{{"text", text}, {"id", out.size()}}.dump() + "\n";
  return out;
}

prep::LmPrepOptions options_for(const TempDir& dir, const char* tokenizer) {
  prep::LmPrepOptions options;
  options.inputs = {dir / "docs.jsonl"};
  options.tokenizer_dir = tokenizer_dir(tokenizer);
  options.output = dir / "lm.h5";
  options.progress = false;
  options.threads = 2;
  return options;
}

// Each document's ids as prep lm defines them: the tokenizer's, then EOS unless already last.
std::vector<Ids> document_ids(const char* tokenizer_name, const std::vector<std::string>& texts) {
  const auto tokenizer = tokenize::ByteLevelBpeTokenizer::from_pretrained(tokenizer_dir(tokenizer_name));
  std::vector<Ids> out;
  for (const auto& text : texts) {
    Ids ids = tokenizer.encode(text);
    if (ids.empty() || ids.back() != *tokenizer.eos_id()) ids.push_back(*tokenizer.eos_id());
    out.push_back(ids);
  }
  return out;
}

// The rows of a split in stored order, each with its source_index.
std::vector<std::pair<Ids, int64_t>> read_rows(const fs::path& path, const std::string& split) {
  const data::DatasetReader reader(path);
  const auto info = reader.split_info(split);
  const auto text = reader.read_text(split, 0, info.num_examples);
  std::vector<std::pair<Ids, int64_t>> rows;
  for (int64_t i = 0; i < text.size(); ++i)
    rows.emplace_back(Ids(text.input_ids.begin() + text.offsets[i], text.input_ids.begin() + text.offsets[i + 1]),
                      text.source_index[i]);
  return rows;
}

}  // namespace

BOOST_AUTO_TEST_CASE(packed_rows_are_the_concatenated_documents_cut_into_blocks) {
  for (const char* name : {"gpt2", "llama3"}) {
    TempDir dir;
    write_file(dir / "docs.jsonl", jsonl(kDocuments));
    auto options = options_for(dir, name);
    options.block_size = 8;
    const auto report = prep::prep_lm(options);
    // Expected: the concatenation cut into rows of 8, each with the row of the document of its first token.
    std::vector<int32_t> all;
    std::vector<int64_t> document_of;
    const auto ids = document_ids(name, kDocuments);
    for (std::size_t d = 0; d < ids.size(); ++d) {
      all.insert(all.end(), ids[d].begin(), ids[d].end());
      document_of.insert(document_of.end(), ids[d].size(), static_cast<int64_t>(d));
    }
    std::multiset<std::pair<Ids, int64_t>> expected;
    for (std::size_t at = 0; at + 8 <= all.size(); at += 8)
      expected.emplace(Ids(all.begin() + at, all.begin() + at + 8), document_of[at]);
    const auto rows = read_rows(options.output, "train");
    BOOST_TEST((std::multiset<std::pair<Ids, int64_t>>(rows.begin(), rows.end()) == expected), name);
    BOOST_TEST(report.splits.at(0).rows == static_cast<int64_t>(all.size() / 8), name);
    BOOST_TEST(report.splits.at(0).document_tokens == static_cast<int64_t>(all.size()), name);
    const data::DatasetReader reader(options.output);
    BOOST_TEST((reader.task() == data::Task::causal_lm));
    BOOST_TEST(reader.label_names().empty());
    BOOST_TEST(reader.tokenizer().at("eos_id").get<int32_t>() == ids[0].back());
    reader.validate_split("train");
    BOOST_CHECK_THROW((void)reader.read_labels("train", 0, 1), Error);
  }
}

BOOST_AUTO_TEST_CASE(without_packing_a_row_is_a_document_cut_to_max_length) {
  TempDir dir;
  write_file(dir / "docs.jsonl", jsonl(kDocuments));
  auto options = options_for(dir, "gpt2");
  options.packing = prep::LmPacking::none;
  options.max_length = 6;
  const auto report = prep::prep_lm(options);
  const auto ids = document_ids("gpt2", kDocuments);
  std::map<int64_t, Ids> by_source;
  for (const auto& [row, source] : read_rows(options.output, "train")) by_source[source] = row;
  BOOST_TEST_REQUIRE(by_source.size() == kDocuments.size());
  int64_t truncated = 0;
  for (std::size_t d = 0; d < ids.size(); ++d) {
    const Ids expected(ids[d].begin(), ids[d].begin() + std::min<std::size_t>(6, ids[d].size()));
    BOOST_TEST(by_source[static_cast<int64_t>(d)] == expected, boost::test_tools::per_element());
    truncated += ids[d].size() > 6 ? 1 : 0;
  }
  BOOST_TEST(report.truncated == truncated);
}

BOOST_AUTO_TEST_CASE(validation_fraction_keeps_each_document_in_one_split) {
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) texts.push_back("document number " + std::to_string(i));
  TempDir dir;
  write_file(dir / "docs.jsonl", jsonl(texts));
  auto options = options_for(dir, "gpt2");
  options.packing = prep::LmPacking::none;
  options.validation_fraction = 0.25;
  options.seed = 5;
  (void)prep::prep_lm(options);
  std::set<int64_t> train, validation;
  for (const auto& row : read_rows(options.output, "train")) train.insert(row.second);
  for (const auto& row : read_rows(options.output, "validation")) validation.insert(row.second);
  BOOST_TEST(validation.size() == 10u);
  BOOST_TEST(train.size() == 30u);
  for (int64_t source : validation) BOOST_TEST(train.count(source) == 0u);
}

BOOST_AUTO_TEST_CASE(a_bad_row_is_named_and_nothing_is_written) {
  TempDir dir;
  write_file(dir / "docs.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"also fine\"}\n{\"body\": \"no text\"}\n");
  auto options = options_for(dir, "gpt2");
  const std::string message = testing::error_message([&] { (void)prep::prep_lm(options); });
  BOOST_TEST(testing::contains(message, "docs.jsonl: line 3 (row 2): missing field 'text'"), message);
  BOOST_TEST(!fs::exists(options.output));
  BOOST_TEST(std::distance(fs::directory_iterator(dir / ""), fs::directory_iterator()) == 1);  // the input alone
  options.skip_invalid = true;
  options.block_size = 2;
  const auto report = prep::prep_lm(options);
  BOOST_TEST(report.skipped.at("missing field") == 1);
}

BOOST_AUTO_TEST_CASE(a_tokenizer_without_eos_is_refused) {
  TempDir dir;
  write_file(dir / "docs.jsonl", jsonl(kDocuments));
  fs::create_directories(dir / "tok");
  fs::copy_file(tokenizer_dir("gpt2") / "tokenizer.json", dir / "tok/tokenizer.json");
  write_file(dir / "tok/tokenizer_config.json", "{\"bos_token\": \"<|endoftext|>\"}");
  auto options = options_for(dir, "gpt2");
  options.tokenizer_dir = dir / "tok";
  const std::string message = testing::error_message([&] { (void)prep::prep_lm(options); });
  BOOST_TEST(testing::contains(message, (dir / "tok").string()), message);
  BOOST_TEST(testing::contains(message, "eos_token: absent"), message);
  BOOST_TEST(!fs::exists(options.output));
}

BOOST_AUTO_TEST_CASE(the_summary_prints_a_causal_lm_file) {
  TempDir dir;
  write_file(dir / "docs.jsonl", jsonl(kDocuments));
  auto options = options_for(dir, "gpt2");
  options.block_size = 4;
  (void)prep::prep_lm(options);
  const auto summary = prep::summarize_dataset(options.output, true);
  BOOST_TEST(summary["task"].get<std::string>() == "causal-lm");
  const std::string text = prep::format_dataset_summary(summary);
  BOOST_TEST(testing::contains(text, "labels      none"), text);
  BOOST_TEST(testing::contains(text, "tokens per example: min 4  median 4"), text);
}
