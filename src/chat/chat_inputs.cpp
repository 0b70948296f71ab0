// transformers' inputs to a chat template (chat_inputs.hpp): PreTrainedTokenizerBase.get_chat_template and
// special_tokens_map, and render_jinja_template's normalization (_normalize_chat_messages, _alias_reasoning_fields).
#include "hpctrain/chat/chat_inputs.hpp"

#include <fstream>
#include <sstream>

#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "cannot read the chat template '{}'", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

Json read_config(const fs::path& path) {
  if (!fs::is_regular_file(path)) return Json::object();
  std::ifstream in(path, std::ios::binary);
  Json config = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  HPCTRAIN_CHECK(!config.is_discarded() && config.is_object(), "{}: not a JSON object (a tokenizer_config.json)",
                 path.string());
  return config;
}

// tokenizer_config.json's chat_template: a string, or a list of named templates.
std::string configured_template(const Json& entry, const fs::path& config_path, bool with_tools, std::string& name) {
  name = config_path.string() + ":chat_template";
  if (entry.is_string()) return entry.get<std::string>();
  HPCTRAIN_CHECK(entry.is_array(), "{}: chat_template must be a string or a list of {{\"name\", \"template\"}}, got {}",
                 config_path.string(), entry.type_name());
  const Json* chosen = nullptr;
  for (const char* wanted : {with_tools ? "tool_use" : "", "default"}) {
    for (const auto& item : entry)
      if (item.is_object() && item.value("name", "") == wanted && item.contains("template")) chosen = &item;
    if (chosen != nullptr) break;
  }
  HPCTRAIN_CHECK(chosen != nullptr && (*chosen)["template"].is_string(),
                 "{}: chat_template lists several templates but none named 'default'{}", config_path.string(),
                 with_tools ? " or 'tool_use'" : "");
  name += "[" + (*chosen)["name"].get<std::string>() + "]";
  return (*chosen)["template"].get<std::string>();
}

}  // namespace

TokenizerChat load_tokenizer_chat(const fs::path& tokenizer_dir, const fs::path& template_file, bool with_tools) {
  TokenizerChat chat;
  const fs::path config_path = tokenizer_dir / "tokenizer_config.json";
  const Json config = read_config(config_path);
  for (const char* attribute : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    const auto found = config.find(attribute);
    if (found == config.end() || found->is_null()) continue;
    if (found->is_string()) chat.special_tokens[attribute] = *found;
    else if (found->is_object() && found->contains("content") && (*found)["content"].is_string())
      chat.special_tokens[attribute] = (*found)["content"];
    else
      fail("{}: {} must be a string or an AddedToken object with \"content\", got {}", config_path.string(), attribute,
           found->dump());
  }
  if (!template_file.empty()) {
    chat.template_source = read_text(template_file);
    chat.template_name = template_file.string();
  } else if (fs::is_regular_file(tokenizer_dir / "chat_template.jinja")) {
    chat.template_source = read_text(tokenizer_dir / "chat_template.jinja");
    chat.template_name = (tokenizer_dir / "chat_template.jinja").string();
  } else if (const auto entry = config.find("chat_template"); entry != config.end() && !entry->is_null()) {
    chat.template_source = configured_template(*entry, config_path, with_tools, chat.template_name);
  }
  return chat;
}

void check_nesting(const Json& data, const std::string& where, std::size_t max_depth) {
  if (!data.is_structured()) return;
  std::vector<std::pair<const Json*, std::size_t>> pending{{&data, 1}};  // iterative: the input may be hostile
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    HPCTRAIN_CHECK(depth <= max_depth, "{}: lists and objects nested deeper than {} levels", where, max_depth);
    for (const auto& item : *node)
      if (item.is_structured()) pending.emplace_back(&item, depth + 1);
  }
}

Json normalize_messages(const Json& messages, const std::string& where) {
  check_nesting(messages, where);
  HPCTRAIN_CHECK(messages.is_array(), "{}: messages must be a list of messages, got {}", where, messages.type_name());
  HPCTRAIN_CHECK(!messages.empty(), "{}: cannot apply a chat template to an empty conversation", where);
  Json out = Json::array();
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    HPCTRAIN_CHECK(message.is_object(), "{}: message {} must be an object, got {}", where, i, message.type_name());
    Json kept = Json::object();
    for (const auto& [key, value] : message.items())
      if (!value.is_null()) kept[key] = value;
    const Json* reasoning = nullptr;
    for (const char* field : {"reasoning_content", "thinking", "reasoning"})
      if (reasoning == nullptr && kept.contains(field)) reasoning = &kept[field];
    if (reasoning == nullptr) {
      out.push_back(std::move(kept));
      continue;
    }
    Json aliased = Json::object();
    aliased["thinking"] = *reasoning;
    for (const auto& [key, value] : kept.items()) aliased[key] = value;
    aliased["reasoning_content"] = *reasoning;
    out.push_back(std::move(aliased));
  }
  return out;
}

Json template_variables(const Json& messages, const Json& tools, bool add_generation_prompt, const Json& special_tokens,
                        const Json& kwargs, const std::string& where) {
  HPCTRAIN_CHECK(tools.is_null() || tools.is_array(), "{}: tools must be a list of JSON schemas, got {}", where,
                 tools.type_name());
  for (const auto& tool : tools.is_array() ? tools : Json::array())
    HPCTRAIN_CHECK(tool.is_object(), "{}: every tool must be a JSON schema (an object), got {}", where, tool.type_name());
  HPCTRAIN_CHECK(kwargs.is_object(), "{}: template kwargs must be a JSON object, got {}", where, kwargs.type_name());
  check_nesting(tools, where);
  check_nesting(kwargs, where);
  Json variables = Json::object();
  variables["messages"] = normalize_messages(messages, where);
  variables["tools"] = tools;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = add_generation_prompt;
  for (const auto& [key, value] : special_tokens.items()) variables[key] = value;
  for (const auto& [key, value] : kwargs.items()) {
    HPCTRAIN_CHECK(key != "messages" && key != "tools" && key != "documents" && key != "add_generation_prompt",
                   "{}: template kwargs cannot set '{}' (apply_chat_template gets it as an argument)", where, key);
    variables[key] = value;
  }
  return variables;
}

}  // namespace hpctrain::chat
