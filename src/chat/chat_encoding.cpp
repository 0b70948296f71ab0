// Conversations → ids and loss masks (chat_encoding.hpp, Note [Assistant masks]).
#include "hpctrain/chat/chat_encoding.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "chat/pystr.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/byte_level_bpe.hpp"

namespace hpctrain::chat {
namespace {

Json merged_kwargs(const Json& base, const Json& row_kwargs, const std::string& where) {
  if (row_kwargs.is_null()) return base;
  HPCTRAIN_CHECK(row_kwargs.is_object(), "{}: chat_template_kwargs must be an object, got {}", where, row_kwargs.type_name());
  Json out = base;
  for (const auto& [key, value] : row_kwargs.items()) out[key] = value;
  return out;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

std::size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

TokenizedText tokenize_with_offsets(const tokenize::ByteLevelBpeTokenizer& tokenizer, std::string_view text,
                                    const std::string& where) {
  TokenizedText out;
  out.ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  out.ends.reserve(out.ids.size());
  std::size_t end = 0;
  bool spelled = true;
  for (const int32_t id : out.ids) {
    const std::string bytes = tokenizer.token_bytes(id);
    spelled = spelled && text.compare(end, bytes.size(), bytes) == 0;
    end += bytes.size();
    out.ends.push_back(end);
  }
  HPCTRAIN_CHECK(spelled && end == text.size(),
                 "{}: the tokens of the rendered chat do not spell its text back (the tokenizer's normalizer changed "
                 "it, e.g. text not in Unicode NFC, or invalid UTF-8), so the loss mask cannot be placed on them",
                 where);
  return out;
}

std::vector<uint8_t> span_mask(const TokenizedText& tokens, const std::vector<GenerationSpan>& spans) {
  // transformers' loop in apply_chat_template, spans in the order the template reported them.
  std::vector<uint8_t> mask(tokens.ids.size(), 0);
  std::size_t span = 0;
  for (std::size_t i = 0; i < tokens.ids.size(); ++i) {
    const std::size_t begin = i == 0 ? 0 : tokens.ends[i - 1], end = tokens.ends[i];
    while (span < spans.size() && begin >= spans[span].end) ++span;
    if (span == spans.size()) break;
    if (end > spans[span].begin) mask[i] = 1;
  }
  return mask;
}

const char* to_string(MaskMethod method) {
  return method == MaskMethod::generation ? "the template's {% generation %} blocks" : "rendering the conversation's prefixes";
}

ChatEncoder::ChatEncoder(const tokenize::ByteLevelBpeTokenizer& tokenizer, const TokenizerChat& chat, Json kwargs,
                         RenderOptions options)
    : tokenizer_(tokenizer),
      template_([&] {
        HPCTRAIN_CHECK(!chat.template_source.empty(),
                       "the tokenizer folder has no chat template (no chat_template.jinja, no chat_template in "
                       "tokenizer_config.json)\n  hint: pass --chat-template FILE, e.g. one of the trl package's "
                       "trl/chat_templates/*.jinja");
        return Template(chat.template_source, chat.template_name);
      }()),
      special_tokens_(chat.special_tokens),
      kwargs_(std::move(kwargs)),
      options_(std::move(options)) {
  HPCTRAIN_CHECK(kwargs_.is_object(), "--template-kwargs must be a JSON object, got {}", kwargs_.type_name());
  end_of_turn_ = probe_end_of_turn();
}

MaskMethod ChatEncoder::mask_method() const {
  return template_.has_generation() ? MaskMethod::generation : MaskMethod::prefixes;
}

Rendered ChatEncoder::render(const Json& messages, const Json& tools, bool add_generation_prompt, const Json& row_kwargs,
                             const std::string& where) const {
  const Json variables = template_variables(messages, tools, add_generation_prompt, special_tokens_,
                                            merged_kwargs(kwargs_, row_kwargs, where), where);
  try {
    return template_.render(variables, options_);
  } catch (const Error& error) {
    fail("{}: {}", where, error.what());
  }
}

std::vector<GenerationSpan> ChatEncoder::prefix_spans(const Json& messages, const Json& tools, const Json& row_kwargs,
                                                      const std::string& full, const std::string& where) const {
  std::vector<GenerationSpan> spans;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const Json& message = messages[i];
    if (!message.is_object() || message.value("role", "") != "assistant") continue;
    HPCTRAIN_CHECK(i > 0, "{}: message 0 is an assistant message; finding what it adds needs the messages before it",
                   where);
    const Json head(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i));
    const Json upto(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const std::string before = render(head, tools, true, row_kwargs, where).text;
    const std::string after = render(upto, tools, false, row_kwargs, where).text;
    HPCTRAIN_CHECK(starts_with(after, before) && starts_with(full, after),
                   "{}: the chat template renders the conversation's first {} messages (with the generation prompt) "
                   "or first {} messages as something other than a start of the whole conversation, so what assistant "
                   "message {} adds cannot be found (Note [Assistant masks])\n  hint: use a template with "
                   "{{% generation %}} blocks (trl's trl/chat_templates/*_training.jinja) via --chat-template",
                   where, i, i + 1, i);
    spans.push_back({before.size(), after.size()});
  }
  return spans;
}

EncodedChat ChatEncoder::encode(const Json& messages, const Json& tools, bool add_generation_prompt,
                                const Json& row_kwargs, const std::string& where) const {
  const Rendered rendered = render(messages, tools, add_generation_prompt, row_kwargs, where);
  const std::vector<GenerationSpan> spans = mask_method() == MaskMethod::generation
                                                ? rendered.generation
                                                : prefix_spans(messages, tools, row_kwargs, rendered.text, where);
  TokenizedText tokens = tokenize_with_offsets(tokenizer_, rendered.text, where);
  EncodedChat out;
  out.mask = span_mask(tokens, spans);
  out.ids = std::move(tokens.ids);
  out.text = rendered.text;
  return out;
}

EncodedChat ChatEncoder::prompt_completion(const Json& prompt, const Json& completion, const Json& tools,
                                           const Json& row_kwargs, const std::string& where) const {
  HPCTRAIN_CHECK(prompt.is_array() && completion.is_array(),
                 "{}: a conversational prompt/completion needs two lists of messages", where);
  Json whole = prompt;
  for (const auto& message : completion) whole.push_back(message);
  const std::string prompt_text = render(prompt, tools, true, row_kwargs, where).text;
  const std::string text = render(whole, tools, false, row_kwargs, where).text;
  const std::vector<int32_t> prompt_ids = tokenizer_.encode(prompt_text, /*add_special_tokens=*/false);
  EncodedChat out;
  out.ids = tokenizer_.encode(text, /*add_special_tokens=*/false);
  const std::size_t prompt_length = common_prefix(prompt_ids, out.ids);
  HPCTRAIN_CHECK(prompt_length == prompt_ids.size(),
                 "{}: the prompt's {} tokens (rendered with add_generation_prompt) are not a prefix of the whole "
                 "conversation's tokens: they part at token {}, so the completion's start is unknown\n  hint: a chat "
                 "template that renders the prompt alike in both cases (TRL warns and trains on a different context)",
                 where, prompt_ids.size(), prompt_length);
  out.mask.assign(out.ids.size(), 0);
  std::fill(out.mask.begin() + static_cast<std::ptrdiff_t>(prompt_length), out.mask.end(), 1);
  out.text = text;
  return out;
}

EncodedChat encode_text_pair(const tokenize::ByteLevelBpeTokenizer& tokenizer, const std::string& eos,
                             const std::string& prompt, const std::string& completion, const std::string& where) {
  HPCTRAIN_CHECK(!eos.empty(), "{}: prompt/completion text needs the tokenizer's eos_token (tokenizer_config.json) to end "
                 "the completion with", where);
  const std::string ended = completion.size() >= eos.size() && completion.compare(completion.size() - eos.size(), eos.size(), eos) == 0
                                ? completion
                                : completion + eos;
  const std::vector<int32_t> prompt_ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
  EncodedChat out;
  out.text = prompt + ended;
  out.ids = tokenizer.encode(out.text, /*add_special_tokens=*/true);
  const std::size_t prompt_length = common_prefix(prompt_ids, out.ids);
  HPCTRAIN_CHECK(prompt_length == prompt_ids.size(),
                 "{}: the prompt's {} tokens are not a prefix of the tokens of prompt + completion: they part at token "
                 "{} (the tokens merge across the boundary)\n  hint: end the prompt on a token boundary, e.g. with a "
                 "space or newline", where, prompt_ids.size(), prompt_length);
  out.mask.assign(out.ids.size(), 0);
  std::fill(out.mask.begin() + static_cast<std::ptrdiff_t>(prompt_length), out.mask.end(), 1);
  return out;
}

std::optional<int32_t> ChatEncoder::probe_end_of_turn() const {
  const Json probe = Json::parse(R"([{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "dummy"},
                                     {"role": "user", "content": "dummy"}])");
  EncodedChat encoded;
  try {
    encoded = conversation(probe, nullptr, nullptr, "probing the end-of-turn token");
  } catch (const Error&) {
    return std::nullopt;
  }
  for (std::size_t i = encoded.ids.size(); i-- > 0;) {
    if (!encoded.mask[i]) continue;
    if (py::strip(tokenizer_.decode({encoded.ids[i]}), std::nullopt, true, true).empty()) continue;
    return tokenizer_.is_added_token(encoded.ids[i]) ? std::optional<int32_t>(encoded.ids[i]) : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace hpctrain::chat
