// Conversations and prompt/completion pairs → token ids and a loss mask, as TRL's SFTTrainer prepares them
// (apply_chat_template(tokenize=True, return_assistant_tokens_mask=True), the completion mask of prompt/completion
// rows), with a byte-level BPE tokenizer.
//
// Note [Assistant masks]
// A token is inside the assistant mask when it overlaps an assistant span of the rendered text (transformers' rule
// for return_assistant_tokens_mask: a token cut by a span boundary counts). The spans come from the template's
// {% generation %} blocks when it has them (MaskMethod::generation, equal to transformers), otherwise from rendering
// the conversation's prefixes (MaskMethod::prefixes): assistant message i spans from the end of the first i messages
// rendered with add_generation_prompt to the end of the first i + 1 messages rendered without, so it holds what the
// message adds, its end-of-turn token(s) included, and not the header that the generation prompt already wrote. A
// template that does not render a conversation's prefixes as prefixes of the whole cannot be used that way (an
// error names the row): give it {% generation %} blocks (trl's *_training.jinja templates do).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpctrain/chat/chat_inputs.hpp"
#include "hpctrain/chat/template.hpp"

namespace hpctrain::tokenize {
class ByteLevelBpeTokenizer;
}

namespace hpctrain::chat {

// Token ids of a text (tokenizer(text, add_special_tokens=False)) and where each ends in the text (bytes).
struct TokenizedText {
  std::vector<int32_t> ids;
  std::vector<std::size_t> ends;  // token i covers [ends[i - 1], ends[i]) (ends[-1] = 0)
};
// Throws Error naming `where` when the tokens do not spell the text back (the tokenizer's normalizer changed it),
// since the mask could then not be placed.
[[nodiscard]] TokenizedText tokenize_with_offsets(const tokenize::ByteLevelBpeTokenizer& tokenizer,
                                                  std::string_view text, const std::string& where);

// 1 for each token overlapping one of the spans (Note [Assistant masks]).
[[nodiscard]] std::vector<uint8_t> span_mask(const TokenizedText& tokens, const std::vector<GenerationSpan>& spans);

enum class MaskMethod : uint8_t { generation, prefixes };
[[nodiscard]] const char* to_string(MaskMethod method);

struct EncodedChat {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // one per id
  std::string text;           // what was tokenized
};

// A plain-text prompt/completion pair as TRL: tokenizer(prompt) and tokenizer(prompt + completion + EOS) (the
// `eos_token` text appended unless the completion ends with it); the mask covers what follows the prompt's ids.
// Throws Error naming `where` when the prompt's ids are not a prefix of the whole's, or there is no EOS.
[[nodiscard]] EncodedChat encode_text_pair(const tokenize::ByteLevelBpeTokenizer& tokenizer, const std::string& eos_token,
                                           const std::string& prompt, const std::string& completion,
                                           const std::string& where);

// One chat template with one tokenizer, its special tokens and the template kwargs (--template-kwargs).
class ChatEncoder {
 public:
  // Throws Error when the folder has no chat template, or the template does not parse.
  ChatEncoder(const tokenize::ByteLevelBpeTokenizer& tokenizer, const TokenizerChat& chat, Json kwargs,
              RenderOptions options = {});

  [[nodiscard]] const Template& chat_template() const { return template_; }
  [[nodiscard]] MaskMethod mask_method() const;
  [[nodiscard]] const Json& special_tokens() const { return special_tokens_; }

  // What apply_chat_template(messages, tools, add_generation_prompt, tokenize=False, **kwargs) renders; a row's
  // own kwargs (`row_kwargs`, an object or null) override the encoder's. Errors name `where`.
  [[nodiscard]] Rendered render(const Json& messages, const Json& tools, bool add_generation_prompt,
                                const Json& row_kwargs, const std::string& where) const;
  // A conversation: its ids and the assistant mask (Note [Assistant masks]), rendered with or without the
  // generation prompt.
  [[nodiscard]] EncodedChat encode(const Json& messages, const Json& tools, bool add_generation_prompt,
                                   const Json& row_kwargs, const std::string& where) const;
  [[nodiscard]] EncodedChat conversation(const Json& messages, const Json& tools, const Json& row_kwargs,
                                         const std::string& where) const {
    return encode(messages, tools, false, row_kwargs, where);
  }
  // A conversational prompt/completion pair as TRL: the ids of prompt + completion and the completion mask, 1 after
  // the ids of the prompt rendered with add_generation_prompt; those must be a prefix of the whole (else Error).
  [[nodiscard]] EncodedChat prompt_completion(const Json& prompt, const Json& completion, const Json& tools,
                                              const Json& row_kwargs, const std::string& where) const;
  // The template's end-of-turn token, as TRL probes it (is_chat_template_stop_token_trained): in a user / assistant
  // / user conversation, the last masked token of the assistant turn that is not whitespace, when it is an added
  // token; nullopt otherwise (the template does not close an assistant turn with a token of its own).
  [[nodiscard]] std::optional<int32_t> end_of_turn() const { return end_of_turn_; }

 private:
  [[nodiscard]] std::vector<GenerationSpan> prefix_spans(const Json& messages, const Json& tools, const Json& row_kwargs,
                                                         const std::string& full, const std::string& where) const;
  [[nodiscard]] std::optional<int32_t> probe_end_of_turn() const;

  const tokenize::ByteLevelBpeTokenizer& tokenizer_;
  Template template_;
  Json special_tokens_;
  Json kwargs_;
  RenderOptions options_;
  std::optional<int32_t> end_of_turn_;
};

}  // namespace hpctrain::chat
