// prep_sft in one process against TRL's SFTTrainer preprocessing (goldens by tests/prep/sft/make_sft_goldens.py):
// four chat templates (Qwen 2.5, Llama 3, Phi-3, Gemma: trl's *_training.jinja) on messages rows, conversational
// prompt/completion rows and plain-text prompt/completion rows: every row's ids and loss mask equal TRL's input_ids
// and labels != -100. Then hostile input: bad rows named, nothing written.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../data/fixtures.hpp"
#include "../error_capture.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/prep/sft_prep.hpp"

using namespace hpctrain;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;
using sources_test::TempDir;
using sources_test::write_file;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(HPCTRAIN_TEST_DATA_DIR) / "prep/sft";

nlohmann::json goldens() {
  std::ifstream in(kDir / "goldens.json");
  return nlohmann::json::parse(in);
}

prep::SftPrepOptions options_for(const TempDir& dir, const fs::path& input, const std::string& style) {
  prep::SftPrepOptions options;
  options.inputs = {input};
  options.tokenizer_dir = kDir / style;
  options.output = dir / "sft.h5";
  options.max_length = 128;
  options.progress = false;
  options.threads = 2;
  options.compression = data::Compression::none;
  return options;
}

struct Row {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;
};

// The train split's rows by source_index.
std::map<int64_t, Row> read_rows(const fs::path& path) {
  const data::DatasetReader reader(path);
  const auto info = reader.split_info("train");
  BOOST_REQUIRE(info.has_loss_mask);
  const auto text = reader.read_text("train", 0, info.num_examples);
  std::map<int64_t, Row> rows;
  for (int64_t i = 0; i < text.size(); ++i) {
    Row& row = rows[text.source_index[i]];
    row.ids.assign(text.input_ids.begin() + text.offsets[i], text.input_ids.begin() + text.offsets[i + 1]);
    row.mask.assign(text.loss_mask.begin() + text.offsets[i], text.loss_mask.begin() + text.offsets[i + 1]);
  }
  return rows;
}

}  // namespace

BOOST_AUTO_TEST_CASE(rows_and_masks_equal_trl_sft_preprocessing) {
  const nlohmann::json all = goldens();
  for (const auto& [style, files] : all["goldens"].items()) {
    for (const auto& [file, expected] : files.items()) {
      TempDir dir;
      const auto report = prep::prep_sft(options_for(dir, kDir / file, style));
      const auto rows = read_rows(dir / "sft.h5");
      BOOST_TEST_INFO(style << " / " << file);
      BOOST_CHECK_EQUAL(rows.size(), expected.size());
      for (const auto& golden : expected) {
        const auto found = rows.find(golden["source_index"].get<int64_t>());
        BOOST_TEST_INFO(style << " / " << file << " row " << golden["source_index"]);
        BOOST_REQUIRE(found != rows.end());
        BOOST_CHECK(found->second.ids == golden["input_ids"].get<std::vector<int32_t>>());
        BOOST_CHECK(found->second.mask == golden["mask"].get<std::vector<uint8_t>>());
      }
      BOOST_CHECK_EQUAL(report.mask_method, "generation");
      BOOST_CHECK(report.end_of_turn_targets > 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_end_of_turn_token_is_found_as_trl_probes_it) {
  TempDir dir;
  const auto report = prep::prep_sft(options_for(dir, kDir / "conversations.jsonl", "qwen2_5"));
  const auto tokenizer_config = nlohmann::json::parse(std::ifstream(kDir / "qwen2_5/tokenizer.json"));
  int32_t im_end = -1;
  for (const auto& token : tokenizer_config["added_tokens"])
    if (token["content"] == "<|im_end|>") im_end = token["id"];
  BOOST_REQUIRE(report.end_of_turn_id.has_value());
  BOOST_CHECK_EQUAL(*report.end_of_turn_id, im_end);
}

BOOST_AUTO_TEST_CASE(bad_rows_are_named_and_nothing_is_written) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"messages": [{"content": "no role"}, {"role": "assistant", "content": "a"}]})", "messages[0]: missing 'role'"},
      {R"({"messages": [{"role": "robot", "content": "x"}, {"role": "assistant", "content": "a"}]})", "unknown role 'robot'"},
      {R"({"messages": [{"role": "user", "content": 5}, {"role": "assistant", "content": "a"}]})",
       "'content' must be a string or a list of {\"type\": ...} parts, got number"},
      {R"({"messages": [{"role": "user", "content": [{"text": "no type"}]}, {"role": "assistant", "content": "a"}]})",
       "content part 0 must be an object with a string 'type'"},
      {R"({"messages": [{"role": "user", "content": "only a question"}]})", "no trainable token"},
      {R"({"prompt": "text", "completion": [{"role": "assistant", "content": "a"}]})", "must both be strings or both lists"},
      {R"({"text": "no messages"})", "a row needs 'messages', or 'prompt' and 'completion'"},
      {R"({"messages": [)", "malformed JSON"},
      {R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]})",
       "System role not supported"},  // gemma's template raises
  };
  for (const auto& [bad_line, expected] : cases) {
    TempDir dir;
    const std::string good = R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})";
    write_file(dir / "rows.jsonl", good + "\n" + good + "\n" + bad_line + "\n" + good + "\n");
    const std::string message = error_message([&] { (void)prep::prep_sft(options_for(dir, dir / "rows.jsonl", "gemma")); });
    BOOST_TEST_INFO(bad_line);
    BOOST_CHECK_MESSAGE(contains(message, "rows.jsonl: line 3 (row 2)") && contains(message, expected), message);
    BOOST_CHECK(!fs::exists(dir / "sft.h5"));
  }
}

BOOST_AUTO_TEST_CASE(skip_invalid_counts_bad_rows_by_reason) {
  TempDir dir;
  const std::string good = R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})";
  write_file(dir / "rows.jsonl", good + "\n{\"messages\": 3}\n" + good + "\n{\"prompt\": 1}\n");
  auto options = options_for(dir, dir / "rows.jsonl", "llama3");
  options.skip_invalid = true;
  const auto report = prep::prep_sft(options);
  BOOST_CHECK_EQUAL(report.skipped.at("malformed messages"), 1);
  BOOST_CHECK_EQUAL(report.skipped.at("missing field"), 1);
  BOOST_CHECK_EQUAL(report.splits.at(0).rows, 2);
}

BOOST_AUTO_TEST_CASE(a_dataset_that_never_trains_the_end_of_turn_token_is_refused) {
  TempDir dir;
  // A template that renders the assistant turn without any end-of-turn token, and no EOS either.
  write_file(dir / "no_stop.jinja",
             "{% for m in messages %}{{ m.role }}: {% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
             "{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}");
  write_file(dir / "rows.jsonl", R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})" "\n");
  auto options = options_for(dir, dir / "rows.jsonl", "phi3");
  options.chat_template = dir / "no_stop.jinja";
  const std::string message = error_message([&] { (void)prep::prep_sft(options); });
  BOOST_CHECK_MESSAGE(contains(message, "never learns to end its turn"), message);
  BOOST_CHECK(!fs::exists(dir / "sft.h5"));
}

BOOST_AUTO_TEST_CASE(a_tokenizer_without_a_chat_template_is_refused_for_conversations) {
  TempDir dir;
  write_file(dir / "rows.jsonl", R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})" "\n");
  auto options = options_for(dir, dir / "rows.jsonl", "phi3");
  options.tokenizer_dir = fs::path(HPCTRAIN_TEST_DATA_DIR) / "tokenize/golden/bpe/gpt2";
  const std::string message = error_message([&] { (void)prep::prep_sft(options); });
  BOOST_CHECK_MESSAGE(contains(message, "needs a chat template") && contains(message, "line 1 (row 0)"), message);
}

BOOST_AUTO_TEST_CASE(loss_on_all_masks_every_token) {
  TempDir dir;
  auto options = options_for(dir, kDir / "conversations.jsonl", "llama3");
  options.loss_on = prep::LossOn::all;
  options.max_length = 0;
  const auto report = prep::prep_sft(options);
  for (const auto& [source, row] : read_rows(dir / "sft.h5"))
    BOOST_CHECK(std::all_of(row.mask.begin(), row.mask.end(), [](uint8_t m) { return m == 1; }));
  BOOST_CHECK_EQUAL(report.truncated, 0);
}

// (The step budget is tested in tests/chat/engine_test.cpp: here it would cost seconds.)
BOOST_AUTO_TEST_CASE(hostile_templates_are_stopped_naming_template_and_row) {
  const std::pair<const char*, const char*> cases[] = {
      {"{% include 'other.jinja' %}", "hostile.jinja line 1: unsupported construct: {% include %}"},
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "nested deeper than 200"},
      {"{% for m in messages %}{% generation %}{{ 'x' * 10000000000 }}{% endgeneration %}{% endfor %}",
       "builds a text of more than 67108864 bytes"},
  };
  for (const auto& [source, expected] : cases) {
    TempDir dir;
    write_file(dir / "hostile.jinja", source);
    write_file(dir / "rows.jsonl", R"({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]})" "\n");
    auto options = options_for(dir, dir / "rows.jsonl", "phi3");
    options.chat_template = dir / "hostile.jinja";
    const std::string message = error_message([&] { (void)prep::prep_sft(options); });
    BOOST_TEST_INFO(source);
    BOOST_CHECK_MESSAGE(contains(message, "hostile.jinja") && contains(message, expected), message);
    if (!contains(source, "include")) BOOST_CHECK_MESSAGE(contains(message, "rows.jsonl: line 1 (row 0)"), message);
    BOOST_CHECK(!fs::exists(dir / "sft.h5"));
  }
}

// Note [SFT rows are documents]: --packing bfd puts whole examples into rows of up to --max-length tokens with prep
// lm's planner; split at document_start, the rows give back exactly the unpacked examples, each with its loss mask.
BOOST_AUTO_TEST_CASE(bfd_rows_hold_whole_examples_with_their_masks) {
  using Segment = std::pair<std::vector<int32_t>, std::vector<uint8_t>>;
  TempDir dir;
  auto options = options_for(dir, kDir / "conversations.jsonl", "qwen2_5");
  options.max_length = 256;
  (void)prep::prep_sft(options);
  std::vector<Segment> unpacked;
  for (auto& [source, row] : read_rows(dir / "sft.h5")) unpacked.emplace_back(row.ids, row.mask);
  options.packing = prep::LmPacking::bfd;
  options.output = dir / "bfd.h5";
  const auto report = prep::prep_sft(options);
  const data::DatasetReader reader(dir / "bfd.h5");
  const auto info = reader.split_info("train");
  BOOST_REQUIRE(info.has_loss_mask && info.has_document_starts);
  const auto text = reader.read_text("train", 0, info.num_examples);
  std::vector<Segment> segments;
  for (int64_t i = 0; i < text.size(); ++i) {
    BOOST_CHECK_LE(text.length(i), options.max_length);
    for (int64_t t = text.offsets[i]; t < text.offsets[i + 1]; ++t) {
      if (text.document_start[t]) segments.emplace_back();
      segments.back().first.push_back(text.input_ids[t]);
      segments.back().second.push_back(text.loss_mask[t]);
    }
  }
  BOOST_CHECK_LT(text.size(), static_cast<int64_t>(unpacked.size()));  // packing happened
  BOOST_CHECK_EQUAL(report.splits.at(0).examples, static_cast<int64_t>(unpacked.size()));
  BOOST_CHECK_EQUAL(report.splits.at(0).rows, text.size());
  std::sort(unpacked.begin(), unpacked.end());
  std::sort(segments.begin(), segments.end());
  BOOST_CHECK(segments == unpacked);
  options.packing = prep::LmPacking::bfd_split;
  options.output = dir / "split.h5";
  const std::string message = error_message([&] { (void)prep::prep_sft(options); });
  BOOST_CHECK_MESSAGE(contains(message, "--packing bfd_split: prep sft packs whole examples"), message);
}
