// `hpctrain chat-template`: prints what transformers' tokenizer.apply_chat_template(messages, tools=...,
// add_generation_prompt=..., tokenize=False, **kwargs) renders, byte for byte (chat/template.hpp); --json adds the
// token ids and the assistant mask (chat/chat_encoding.hpp). One process.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "chat_prompt.hpp"
#include "commands.hpp"
#include "hpctrain/chat/chat_encoding.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"
#include "option_parsing.hpp"

namespace hpctrain::cli {
namespace {

namespace fs = std::filesystem;
using chat::Json;

constexpr const char* kChatTemplateUsage =
    "hpctrain chat-template --tokenizer DIR [--chat-template FILE] --messages FILE.json [--tools FILE.json] "
    "[--add-generation-prompt] [--template-kwargs JSON] [--json]";

struct ChatTemplateOptions {
  std::string tokenizer, chat_template, messages, tools, template_kwargs = "{}";
  bool add_generation_prompt = false, json = false;
};

po::options_description chat_template_options(ChatTemplateOptions& o) {
  po::options_description options("Chat template");
  options.add_options()
      ("tokenizer", po::value(&o.tokenizer)->required(), "Hugging Face tokenizer folder: its chat_template.jinja or "
       "tokenizer_config.json's chat_template, and its special tokens (bos_token, eos_token, ...)")
      ("chat-template", po::value(&o.chat_template), "a Jinja chat template file to use instead of the folder's")
      ("messages", po::value(&o.messages)->required(), "a JSON file holding the list of messages (role, content; "
       "content may be a list of {\"type\": \"text\", ...} parts; tool_calls, role tool, reasoning_content)")
      ("tools", po::value(&o.tools), "a JSON file holding the list of tools (JSON schemas)")
      ("add-generation-prompt", po::bool_switch(&o.add_generation_prompt), "end with the start of an assistant turn")
      ("template-kwargs", po::value(&o.template_kwargs)->default_value(o.template_kwargs),
       "a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'")
      ("json", po::bool_switch(&o.json), "print {\"text\", \"input_ids\", \"assistant_masks\", \"mask_method\"}: the ids "
       "of tokenizer(text, add_special_tokens=False) (needs the folder's tokenizer.json) and transformers' assistant "
       "mask (docs/chat.md)");
  return options;
}

Json read_json_file(const std::string& path, const char* option) {
  std::ifstream in(path, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "{} {}: cannot read the file", option, path);
  Json value = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(!value.is_discarded(), "{} {}: not valid JSON", option, path);
  HPCTRAIN_CHECK(value.is_array(), "{} {}: expected a JSON list, got {}", option, path, value.type_name());
  return value;
}

}  // namespace

ChatPrompt chat_prompt(const tokenize::ByteLevelBpeTokenizer& tokenizer, const fs::path& tokenizer_dir,
                       const fs::path& chat_template, const std::string& system, const std::string& prompt) {
  const chat::TokenizerChat folder = chat::load_tokenizer_chat(tokenizer_dir, chat_template, false);
  const chat::ChatEncoder encoder(tokenizer, folder, Json::object());
  Json messages = Json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  messages.push_back({{"role", "user"}, {"content", prompt}});
  ChatPrompt out;
  out.ids = encoder.encode(messages, nullptr, /*add_generation_prompt=*/true, nullptr, "--chat").ids;
  if (const auto eot = encoder.end_of_turn()) out.stop_ids.push_back(*eot);
  if (const auto eos = tokenizer.eos_id()) out.stop_ids.push_back(*eos);
  return out;
}

int chat_template_command(const Args& args) {
  ChatTemplateOptions o;
  po::options_description options = chat_template_options(o);
  po::variables_map values;
  if (!parse_options(args, kChatTemplateUsage, options, values)) return 0;
  const Json messages = read_json_file(o.messages, "--messages");
  const Json tools = o.tools.empty() ? Json() : read_json_file(o.tools, "--tools");
  const Json kwargs = Json::parse(o.template_kwargs, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(kwargs.is_object(), "--template-kwargs: expected a JSON object, got '{}'", o.template_kwargs);
  const chat::TokenizerChat folder = chat::load_tokenizer_chat(o.tokenizer, o.chat_template, !tools.is_null());
  HPCTRAIN_CHECK(!folder.template_source.empty(),
                 "{}: no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json)\n  hint: "
                 "pass --chat-template FILE", o.tokenizer);
  if (!o.json) {
    const chat::Template compiled(folder.template_source, folder.template_name);
    const Json variables = chat::template_variables(messages, tools, o.add_generation_prompt, folder.special_tokens,
                                                    kwargs, "--messages " + o.messages);
    const std::string text = compiled.render(variables).text;
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  const auto tokenizer = tokenize::ByteLevelBpeTokenizer::from_pretrained(o.tokenizer);
  const chat::ChatEncoder encoder(tokenizer, folder, kwargs);
  const chat::EncodedChat encoded = encoder.encode(messages, tools, o.add_generation_prompt, nullptr, "--messages " + o.messages);
  const Json out = {{"text", encoded.text},
                    {"input_ids", encoded.ids},
                    {"assistant_masks", encoded.mask},
                    {"mask_method", encoder.mask_method() == chat::MaskMethod::generation ? "generation" : "prefixes"}};
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace hpctrain::cli
