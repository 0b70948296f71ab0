// `prep sft`'s rows (sft_rows.hpp): detected per row as TRL's is_conversational does, checked, encoded.
#include "sft_rows.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"

namespace hpctrain::prep::detail {
namespace {

using chat::Json;

// The roles chat templates know (OpenAI's, and Llama 3.1's ipython for tool output).
constexpr const char* kRoles[] = {"system", "developer", "user", "assistant", "tool", "ipython"};

// "" when `content` is a string, a list of {"type": ...} parts (text parts with a "text" string), or absent where
// a message may go without it; else what is wrong.
std::string content_problem(const Json& message, const std::string& role) {
  const auto content = message.find("content");
  if (content == message.end() || content->is_null()) {
    if (role == "assistant" && message.contains("tool_calls")) return "";
    return "missing 'content'";
  }
  if (content->is_string()) return "";
  if (!content->is_array())
    return fmt::format("'content' must be a string or a list of {{\"type\": ...}} parts, got {}", content->type_name());
  for (std::size_t i = 0; i < content->size(); ++i) {
    const Json& part = (*content)[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return fmt::format("content part {} must be an object with a string 'type'", i);
    if (part["type"] == "text" && (!part.contains("text") || !part["text"].is_string()))
      return fmt::format("content part {} of type 'text' needs a string 'text'", i);
  }
  return "";
}

// "" for a well-formed list of messages, else which message and what is wrong.
std::string messages_problem(const Json& messages, const char* field) {
  if (!messages.is_array()) return fmt::format("'{}' must be a list of messages, got {}", field, messages.type_name());
  if (messages.empty()) return fmt::format("'{}' is an empty list", field);
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    if (!message.is_object()) return fmt::format("{}[{}] must be an object, got {}", field, i, message.type_name());
    const auto role = message.find("role");
    if (role == message.end() || role->is_null()) return fmt::format("{}[{}]: missing 'role'", field, i);
    if (!role->is_string()) return fmt::format("{}[{}]: 'role' must be a string, got {}", field, i, role->type_name());
    const std::string name = role->get<std::string>();
    if (std::none_of(std::begin(kRoles), std::end(kRoles), [&](const char* known) { return name == known; }))
      return fmt::format("{}[{}]: unknown role '{}' (expected system, developer, user, assistant, tool or ipython)",
                         field, i, name);
    if (const std::string problem = content_problem(message, name); !problem.empty())
      return fmt::format("{}[{}] ({}): {}", field, i, name, problem);
    if (message.contains("tool_calls") && !message["tool_calls"].is_null() && !message["tool_calls"].is_array())
      return fmt::format("{}[{}]: 'tool_calls' must be a list", field, i);
  }
  return "";
}

RowProblem problem(const char* reason, std::string detail) { return RowProblem{reason, std::move(detail)}; }

std::variant<SftRow, RowProblem> read_json_row(const std::string& line) {
  Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) return problem("malformed row", "malformed JSON");
  if (!record.is_object()) return problem("malformed row", fmt::format("the line is a JSON {}, expected an object", record.type_name()));
  SftRow row;
  if (const auto tools = record.find("tools"); tools != record.end() && !tools->is_null()) {
    row.tools = tools->is_string() ? Json::parse(tools->get<std::string>(), nullptr, false) : *tools;
    if (row.tools.is_discarded() || !row.tools.is_array())
      return problem("malformed row", "'tools' must be a list of JSON schemas (or its JSON text)");
  }
  if (const auto kwargs = record.find("chat_template_kwargs"); kwargs != record.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) return problem("malformed row", "'chat_template_kwargs' must be an object");
    row.kwargs = *kwargs;
  }
  if (const auto messages = record.find("messages"); messages != record.end() && !messages->is_null()) {
    if (std::string detail = messages_problem(*messages, "messages"); !detail.empty()) return problem("malformed messages", detail);
    row.kind = SftRowKind::conversation;
    row.messages = std::move(*messages);
    return row;
  }
  const auto prompt = record.find("prompt"), completion = record.find("completion");
  if (prompt == record.end() || completion == record.end() || prompt->is_null() || completion->is_null())
    return problem("missing field", "a row needs 'messages', or 'prompt' and 'completion'");
  if (prompt->is_string() && completion->is_string()) {
    row.kind = SftRowKind::text_pair;
  } else if (prompt->is_array() && completion->is_array()) {
    for (const auto& [field, value] : {std::pair<const char*, const Json*>{"prompt", &*prompt}, {"completion", &*completion}})
      if (std::string detail = messages_problem(*value, field); !detail.empty()) return problem("malformed messages", detail);
    row.kind = SftRowKind::chat_pair;
  } else {
    return problem("malformed row", fmt::format("'prompt' and 'completion' must both be strings or both lists of "
                                                "messages, got {} and {}", prompt->type_name(), completion->type_name()));
  }
  row.prompt = std::move(*prompt);
  row.completion = std::move(*completion);
  return row;
}

SftExample whole(chat::EncodedChat encoded) {
  SftExample example;
  example.ids = std::move(encoded.ids);
  example.mask = std::move(encoded.mask);
  return example;
}

}  // namespace

std::vector<std::string> sft_fields(data::TextFormat format) {
  if (format == data::TextFormat::jsonl) return {"line"};
  return {"prompt", "completion"};
}

std::variant<SftRow, RowProblem> read_sft_row(const data::TextRecord& record, data::TextFormat format) {
  if (!record.error.empty()) return problem("malformed row", record.error);
  if (format == data::TextFormat::jsonl) return read_json_row(*record.fields[0]);
  for (std::size_t i = 0; i < 2; ++i)
    if (!record.fields[i]) return problem("missing field", fmt::format("missing field '{}'", i == 0 ? "prompt" : "completion"));
  SftRow row;
  row.kind = SftRowKind::text_pair;
  row.prompt = *record.fields[0];
  row.completion = *record.fields[1];
  return row;
}

std::variant<SftExample, RowProblem> encode_sft_row(const SftEncoders& encoders, const SftRow& row, LossOn loss_on,
                                                    int max_length) {
  SftExample example;
  try {
    const bool pair = row.kind != SftRowKind::conversation;
    if (loss_on == LossOn::completion && !pair)
      return problem("loss on completion", "--loss-on completion needs prompt/completion rows; this row has 'messages'");
    if (loss_on == LossOn::assistant && row.kind == SftRowKind::text_pair)
      return problem("loss on assistant", "--loss-on assistant needs conversational rows; this row's prompt and "
                                          "completion are plain strings");
    if (row.kind == SftRowKind::text_pair) {
      example = whole(chat::encode_text_pair(encoders.tokenizer, encoders.eos_token, row.prompt.get<std::string>(),
                                             row.completion.get<std::string>(), "prompt/completion"));
    } else if (row.kind == SftRowKind::chat_pair && loss_on != LossOn::assistant) {
      example = whole(encoders.chat->prompt_completion(row.prompt, row.completion, row.tools, row.kwargs, "prompt/completion"));
    } else {
      Json messages = pair ? row.prompt : row.messages;
      if (pair)
        for (const auto& message : row.completion) messages.push_back(message);
      example = whole(encoders.chat->conversation(messages, row.tools, row.kwargs, "messages"));
    }
  } catch (const Error& error) {
    return problem("template error", error.what());
  }
  if (example.ids.empty()) return problem("no tokens", "the chat template renders this row as no tokens");
  if (loss_on == LossOn::all) std::fill(example.mask.begin(), example.mask.end(), 1);
  if (std::find(example.mask.begin(), example.mask.end(), 1) == example.mask.end())
    return problem("no trainable token",
                   fmt::format("no trainable token: no token of the row is inside the loss mask (--loss-on {}){}",
                               to_string(loss_on), row.kind == SftRowKind::conversation ? " (no assistant turn?)" : ""));
  if (max_length > 0 && example.ids.size() > static_cast<std::size_t>(max_length)) {
    example.ids.resize(static_cast<std::size_t>(max_length));
    example.mask.resize(static_cast<std::size_t>(max_length));
    example.truncated = true;
  }
  return example;
}

}  // namespace hpctrain::prep::detail
