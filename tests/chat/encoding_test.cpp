// Conversations to ids and assistant masks (chat_encoding.hpp): transformers' overlap rule on hand-made spans, the
// prefix method on a template without {% generation %} (Qwen 2.5's own), the end-of-turn probe, the CLI-level
// errors for a folder without a template.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "../error_capture.hpp"
#include "hpctrain/chat/chat_encoding.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"

namespace {

namespace fs = std::filesystem;
using hpctrain::chat::ChatEncoder;
using hpctrain::chat::GenerationSpan;
using hpctrain::chat::Json;
using hpctrain::chat::TokenizedText;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;

const fs::path kQwen = fs::path(HPCTRAIN_TEST_DATA_DIR) / "prep/sft/qwen2_5";
const fs::path kTemplates = fs::path(HPCTRAIN_TEST_DATA_DIR) / "chat/templates";

std::string decode_masked(const hpctrain::tokenize::ByteLevelBpeTokenizer& tokenizer, const hpctrain::chat::EncodedChat& e) {
  std::vector<int32_t> masked;
  for (std::size_t i = 0; i < e.ids.size(); ++i)
    if (e.mask[i]) masked.push_back(e.ids[i]);
  return tokenizer.decode(masked);
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_token_is_masked_when_it_overlaps_a_span) {
  TokenizedText tokens;
  tokens.ids = {1, 2, 3, 4, 5};
  tokens.ends = {2, 4, 7, 8, 10};  // [0,2) [2,4) [4,7) [7,8) [8,10)
  const auto mask = hpctrain::chat::span_mask(tokens, {{3, 5}, {8, 8}, {9, 10}});
  // [3,5) overlaps tokens 1 and 2; the empty span at 8 marks the token after it (transformers' loop); [9,10) token 4.
  BOOST_CHECK((mask == std::vector<uint8_t>{0, 1, 1, 0, 1}));
}

BOOST_AUTO_TEST_CASE(without_generation_blocks_each_assistant_message_adds_its_span) {
  const auto tokenizer = hpctrain::tokenize::ByteLevelBpeTokenizer::from_pretrained(kQwen);
  auto chat = hpctrain::chat::load_tokenizer_chat(kQwen, kTemplates / "qwen2_5.jinja", false);
  const ChatEncoder encoder(tokenizer, chat, Json::object());
  BOOST_CHECK(encoder.mask_method() == hpctrain::chat::MaskMethod::prefixes);
  const Json messages = Json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye 😀"}])");
  const auto encoded = encoder.conversation(messages, nullptr, nullptr, "test");
  BOOST_CHECK_EQUAL(decode_masked(tokenizer, encoded), "Hello!<|im_end|>\nBye 😀<|im_end|>\n");
  // The same conversation with trl's training variant: {% generation %} also holds the "\n" after the header.
  chat = hpctrain::chat::load_tokenizer_chat(kQwen, kTemplates / "qwen2_5_training.jinja", false);
  const ChatEncoder training(tokenizer, chat, Json::object());
  BOOST_CHECK(training.mask_method() == hpctrain::chat::MaskMethod::generation);
  const auto marked = training.conversation(messages, nullptr, nullptr, "test");
  BOOST_CHECK(marked.ids == encoded.ids);
  BOOST_CHECK_EQUAL(decode_masked(tokenizer, marked), "\nHello!<|im_end|>\n\nBye 😀<|im_end|>\n");
  BOOST_CHECK(encoder.end_of_turn() == tokenizer.token_to_id("<|im_end|>"));
  BOOST_CHECK(training.end_of_turn() == tokenizer.token_to_id("<|im_end|>"));
}

BOOST_AUTO_TEST_CASE(a_template_whose_prefixes_differ_is_refused_naming_the_row) {
  const auto tokenizer = hpctrain::tokenize::ByteLevelBpeTokenizer::from_pretrained(kQwen);
  hpctrain::chat::TokenizerChat chat = hpctrain::chat::load_tokenizer_chat(kQwen, {}, false);
  // The number of messages changes the first line: no prefix of the conversation renders as its start.
  chat.template_source = "{{ messages|length }}\n{% for m in messages %}{{ m.content }}\n{% endfor %}";
  const ChatEncoder encoder(tokenizer, chat, Json::object());
  const Json messages = Json::parse(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])");
  const std::string message = error_message([&] { (void)encoder.conversation(messages, nullptr, nullptr, "rows.jsonl row 7"); });
  BOOST_CHECK_MESSAGE(contains(message, "rows.jsonl row 7") && contains(message, "generation"), message);
}

BOOST_AUTO_TEST_CASE(a_folder_without_a_template_is_refused) {
  const auto tokenizer = hpctrain::tokenize::ByteLevelBpeTokenizer::from_pretrained(kQwen);
  hpctrain::chat::TokenizerChat chat;
  const std::string message = error_message([&] { const ChatEncoder encoder(tokenizer, chat, Json::object()); });
  BOOST_CHECK_MESSAGE(contains(message, "no chat template"), message);
}

BOOST_AUTO_TEST_CASE(ids_and_assistant_masks_equal_transformers_apply_chat_template) {
  // Goldens by tests/prep/sft/make_sft_goldens.py: apply_chat_template(tokenize=True, return_assistant_tokens_mask=True).
  const fs::path dir = fs::path(HPCTRAIN_TEST_DATA_DIR) / "prep/sft";
  std::ifstream goldens_file(dir / "goldens.json");
  const Json goldens = Json::parse(goldens_file);
  std::vector<Json> rows;
  std::ifstream conversations(dir / "conversations.jsonl");
  for (std::string line; std::getline(conversations, line);) rows.push_back(Json::parse(line));
  for (const auto& [style, cases] : goldens["apply_chat_template"].items()) {
    const auto tokenizer = hpctrain::tokenize::ByteLevelBpeTokenizer::from_pretrained(dir / style);
    const ChatEncoder encoder(tokenizer, hpctrain::chat::load_tokenizer_chat(dir / style, {}, false), Json::object());
    for (const Json& golden : cases) {
      const auto encoded = encoder.encode(rows[golden["row"].get<std::size_t>()]["messages"], nullptr,
                                          golden["add_generation_prompt"].get<bool>(), nullptr, style);
      BOOST_TEST_INFO(style << " row " << golden["row"] << " add_generation_prompt " << golden["add_generation_prompt"]);
      BOOST_CHECK(encoded.text == golden["text"].get<std::string>());
      BOOST_CHECK(encoded.ids == golden["input_ids"].get<std::vector<int32_t>>());
      BOOST_CHECK(encoded.mask == golden["assistant_masks"].get<std::vector<uint8_t>>());
    }
  }
}
