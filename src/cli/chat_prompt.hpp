// Private to src/cli: `hpctrain generate --chat`'s prompt, the user's text as a conversation rendered with the
// tokenizer folder's chat template (chat_template_command.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace hpctrain::tokenize {
class ByteLevelBpeTokenizer;
}

namespace hpctrain::cli {

struct ChatPrompt {
  std::vector<int32_t> ids;      // the rendered conversation, tokenized without added special tokens
  std::vector<int64_t> stop_ids;  // the template's end-of-turn token and the tokenizer's EOS
};

// [{"role": "system", "content": system} when not empty, {"role": "user", "content": prompt}] rendered with
// add_generation_prompt, as transformers' apply_chat_template(..., add_generation_prompt=True, tokenize=True).
[[nodiscard]] ChatPrompt chat_prompt(const tokenize::ByteLevelBpeTokenizer& tokenizer,
                                     const std::filesystem::path& tokenizer_dir,
                                     const std::filesystem::path& chat_template, const std::string& system,
                                     const std::string& prompt);

}  // namespace hpctrain::cli
