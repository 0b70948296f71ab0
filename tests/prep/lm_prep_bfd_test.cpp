// prep_lm --packing bfd / bfd_split in one process on the golden GPT-2 tokenizer: every row is whole documents
// (or pieces of the long ones) with their boundaries stored, the file reads back, inspect reports the fill, and
// the hostile cases are named (Note [Best-fit-decreasing rows]).
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../data/fixtures.hpp"
#include "../error_capture.hpp"
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

fs::path bfd_tokenizer_dir() { return fs::path(HPCTRAIN_TEST_DATA_DIR) / "tokenize/golden/bpe/gpt2"; }

// Documents of many lengths: short ones, and a few longer than the rows of the tests (12 tokens).
std::vector<std::string> bfd_texts() {
  std::vector<std::string> out = {"x", "Hello world", "The quick brown fox jumps over the lazy dog.",
                                  "A much longer document that spans more than one row of twelve tokens when packed.",
                                  "short", "two words"};
  for (int i = 0; i < 30; ++i) out.push_back("document " + std::to_string(i) + std::string(static_cast<std::size_t>(i % 5), '!'));
  return out;
}

std::string bfd_jsonl(const std::vector<std::string>& documents) {
  std::string out;
  for (const auto& text : documents) out += nlohmann::json{{"text", text}}.dump() + "\n";
  return out;
}

prep::LmPrepOptions bfd_options(const TempDir& dir, prep::LmPacking packing) {
  prep::LmPrepOptions options;
  options.inputs = {dir / "docs.jsonl"};
  options.tokenizer_dir = bfd_tokenizer_dir();
  options.output = dir / "lm.h5";
  options.progress = false;
  options.threads = 1;
  options.packing = packing;
  options.max_length = 12;
  return options;
}

// The documents of every row of a split (split at document_start), each with the source row of its row.
std::vector<Ids> bfd_documents_in(const fs::path& path, const std::string& split, std::vector<int64_t>& row_lengths) {
  const data::DatasetReader reader(path);
  const auto text = reader.read_text(split, 0, reader.split_info(split).num_examples);
  BOOST_TEST_REQUIRE(text.has_document_starts());
  std::vector<Ids> out;
  for (int64_t row = 0; row < text.size(); ++row) {
    row_lengths.push_back(text.length(row));
    for (int64_t t = text.offsets[row]; t < text.offsets[row + 1]; ++t) {
      if (text.document_start[static_cast<std::size_t>(t)] != 0) out.emplace_back();
      out.back().push_back(text.input_ids[static_cast<std::size_t>(t)]);
    }
  }
  return out;
}

// Everything a split holds, for comparing two files.
std::vector<std::vector<int64_t>> bfd_contents(const fs::path& path) {
  const data::DatasetReader reader(path);
  std::vector<std::vector<int64_t>> out;
  for (const auto& split : reader.splits()) {
    const auto text = reader.read_text(split, 0, reader.split_info(split).num_examples);
    out.emplace_back(text.input_ids.begin(), text.input_ids.end());
    out.push_back(text.offsets);
    out.push_back(text.source_index);
    out.emplace_back(text.document_start.begin(), text.document_start.end());
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(bfd_rows_hold_whole_documents_with_their_boundaries) {
  const auto tokenizer = tokenize::ByteLevelBpeTokenizer::from_pretrained(bfd_tokenizer_dir());
  const auto documents = bfd_texts();
  for (auto packing : {prep::LmPacking::bfd, prep::LmPacking::bfd_split}) {
    BOOST_TEST_CONTEXT(prep::to_string(packing)) {
      TempDir dir;
      write_file(dir / "docs.jsonl", bfd_jsonl(documents));
      const auto options = bfd_options(dir, packing);
      const auto report = prep::prep_lm(options);
      // Expected: each document's ids (then EOS) cut to 12 (bfd) or in pieces of 12 (bfd_split).
      std::multiset<Ids> expected;
      int64_t cut = 0, tokens = 0;
      for (const auto& text : documents) {
        Ids ids = tokenizer.encode(text);
        ids.push_back(*tokenizer.eos_id());
        cut += ids.size() > 12 ? 1 : 0;
        for (std::size_t first = 0; first < ids.size(); first += 12) {
          expected.emplace(ids.begin() + static_cast<std::ptrdiff_t>(first),
                           ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), first + 12)));
          tokens += static_cast<int64_t>(std::min<std::size_t>(ids.size() - first, 12));
          if (packing == prep::LmPacking::bfd) break;
        }
      }
      BOOST_TEST_REQUIRE(cut > 0);
      std::vector<int64_t> row_lengths;
      const auto got = bfd_documents_in(options.output, "train", row_lengths);
      BOOST_TEST((std::multiset<Ids>(got.begin(), got.end()) == expected));
      for (int64_t length : row_lengths) BOOST_TEST(length <= 12);
      BOOST_TEST(report.truncated == (packing == prep::LmPacking::bfd ? cut : 0));
      BOOST_TEST(report.splits.at(0).tokens == tokens);
      BOOST_TEST(report.splits.at(0).rows == static_cast<int64_t>(row_lengths.size()));
      const data::DatasetReader reader(options.output);
      BOOST_TEST(reader.tokenizer().at("packing").get<std::string>() == prep::to_string(packing));
      reader.validate_split("train");
      // inspect: the fill is tokens / (rows x 12), and says the rows keep their boundaries.
      const auto summary = prep::summarize_dataset(options.output, true);
      const double fill = static_cast<double>(tokens) / static_cast<double>(12 * row_lengths.size());
      BOOST_TEST(summary["splits"][0]["fill"].get<double>() == fill, boost::test_tools::tolerance(1e-12));
      const std::string text = prep::format_dataset_summary(summary);
      BOOST_TEST(text.find("fill: ") != std::string::npos, text);
      BOOST_TEST(text.find("boundaries kept") != std::string::npos, text);
    }
  }
}

BOOST_AUTO_TEST_CASE(bfd_output_depends_only_on_the_inputs_and_the_seed) {
  TempDir dir;
  write_file(dir / "docs.jsonl", bfd_jsonl(bfd_texts()));
  auto options = bfd_options(dir, prep::LmPacking::bfd);
  options.validation_fraction = 0.2;
  (void)prep::prep_lm(options);
  const auto first = bfd_contents(options.output);
  options.output = dir / "again.h5";
  options.threads = 3;
  options.memory_mb = 2;  // other buckets (rows_are_joined_from_segments_across_buckets covers tiny ones)
  (void)prep::prep_lm(options);
  BOOST_TEST((bfd_contents(options.output) == first));
  options.output = dir / "other.h5";
  options.seed = 43;
  (void)prep::prep_lm(options);
  BOOST_TEST((bfd_contents(options.output) != first));
}

BOOST_AUTO_TEST_CASE(bfd_hostile_options_and_empty_splits_are_named) {
  TempDir dir;
  write_file(dir / "docs.jsonl", bfd_jsonl(bfd_texts()));
  write_file(dir / "empty.jsonl", "{\"body\": \"no text field\"}\n");
  auto options = bfd_options(dir, prep::LmPacking::bfd);
  options.block_size = 16;
  std::string message = testing::error_message([&] { (void)prep::prep_lm(options); });
  BOOST_TEST((testing::contains(message, "--block-size 16") && testing::contains(message, "use --max-length")), message);
  options.block_size = 0;
  options.validation_input = dir / "empty.jsonl";
  options.skip_invalid = true;
  message = testing::error_message([&] { (void)prep::prep_lm(options); });
  BOOST_TEST(testing::contains(message, "split 'validation' has no documents"), message);
  BOOST_TEST(!fs::exists(options.output));
  BOOST_CHECK_THROW((void)prep::parse_lm_packing("bfd-split"), Error);
  BOOST_TEST((prep::parse_lm_packing("group") == prep::LmPacking::wrapped));
}
