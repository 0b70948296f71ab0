// What transformers' tokenizer.apply_chat_template gives a chat template: the template of a Hugging Face
// tokenizer folder, its special tokens, and the variables (messages normalized as transformers 5 normalizes them).
#pragma once

#include <filesystem>
#include <string>

#include "hpctrain/chat/template.hpp"

namespace hpctrain::chat {

// A tokenizer folder's chat template and special-token variables.
struct TokenizerChat {
  std::string template_source;  // empty when the folder has none
  std::string template_name;    // where it came from, for errors: a file, or "DIR/tokenizer_config.json:chat_template"
  // transformers' special_tokens_map: bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token,
  // those tokenizer_config.json names (a string, or an AddedToken object's "content").
  Json special_tokens = Json::object();
};

// The template: `template_file` when given, else DIR/chat_template.jinja, else tokenizer_config.json's
// chat_template (a string, or a list of {"name", "template"}: "tool_use" when `with_tools` and present, else
// "default"). Throws Error naming the file for a malformed tokenizer_config.json or an unreadable template; a
// folder without any template gives an empty template_source.
[[nodiscard]] TokenizerChat load_tokenizer_chat(const std::filesystem::path& tokenizer_dir,
                                                const std::filesystem::path& template_file, bool with_tools);

// The conversation as transformers passes it: every message a JSON object, keys whose value is null dropped,
// a message's reasoning (the first non-null of reasoning_content, thinking, reasoning) copied to `thinking` (first
// key) and `reasoning_content`. Throws Error (naming `where`) for an empty conversation or a message that is not an
// object.
[[nodiscard]] Json normalize_messages(const Json& messages, const std::string& where);

// Throws Error naming `where` when `data` nests lists and objects deeper than `max_depth` (hostile input: copying or
// printing it would recurse that deep).
void check_nesting(const Json& data, const std::string& where, std::size_t max_depth = 128);

// The template's variables: messages (normalized), tools (null or a list of JSON schemas), documents (null),
// add_generation_prompt, the special tokens, then `kwargs` (which override special tokens, as in transformers).
[[nodiscard]] Json template_variables(const Json& messages, const Json& tools, bool add_generation_prompt,
                                      const Json& special_tokens, const Json& kwargs, const std::string& where);

}  // namespace hpctrain::chat
