// Private: `prep sft`'s rows: the row formats TRL detects (messages, prompt/completion as strings or message lists,
// an optional tools column and chat_template_kwargs), the checks of a conversation, and a row's ids and loss mask.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "hpctrain/chat/chat_encoding.hpp"
#include "hpctrain/data/text_records.hpp"
#include "hpctrain/prep/sft_prep.hpp"

namespace hpctrain::prep::detail {

enum class SftRowKind : uint8_t { conversation, chat_pair, text_pair };

struct SftRow {
  SftRowKind kind = SftRowKind::conversation;
  chat::Json messages;            // conversation
  chat::Json prompt, completion;  // chat_pair: message lists; text_pair: strings
  chat::Json tools;               // null or a list of JSON schemas
  chat::Json kwargs;              // null or the row's chat_template_kwargs
};

// Why a row is rejected: `reason` counts it under --skip-invalid, `detail` names the field and what is wrong.
struct RowProblem {
  const char* reason = "";
  std::string detail;
};

// A record (a JSONL line read whole, or CSV/TSV prompt and completion columns) as a row.
[[nodiscard]] std::variant<SftRow, RowProblem> read_sft_row(const data::TextRecord& record, data::TextFormat format);

// The columns a CSV/TSV input needs, and the one field of a JSONL line read whole.
[[nodiscard]] std::vector<std::string> sft_fields(data::TextFormat format);

struct SftExample {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // 1 on the tokens the loss is over
  bool truncated = false;     // cut to max_length
};

// What encodes rows: the tokenizer and its EOS text (plain prompt/completion rows need no template), and the chat
// encoder (null when the tokenizer folder has no chat template).
struct SftEncoders {
  const tokenize::ByteLevelBpeTokenizer& tokenizer;
  std::string eos_token;
  const chat::ChatEncoder* chat = nullptr;
};

// A row's ids and mask under `loss_on`, cut to max_length (0: not cut). A row whose mask has no 1 before the cut is
// a problem ("no trainable token"); after the cut it is returned with an all-zero mask (TRL drops it).
[[nodiscard]] std::variant<SftExample, RowProblem> encode_sft_row(const SftEncoders& encoders, const SftRow& row,
                                                                  LossOn loss_on, int max_length);

}  // namespace hpctrain::prep::detail
