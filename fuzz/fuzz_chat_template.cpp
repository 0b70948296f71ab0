// libFuzzer target: the chat template engine (src/chat) on an arbitrary template. Byte 0 picks the conversation
// (a few fixed ones: plain, tool calls, reasoning, parts, a large one); the rest is the template. Either Error
// (a syntax error, a refused construct, a template error, a limit), or a text within the limits whose
// {% generation %} spans lie inside it, and a second rendering gives the same text and spans.
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "hpctrain/chat/chat_inputs.hpp"
#include "hpctrain/chat/template.hpp"

namespace {

using hpctrain::chat::Json;

const Json& conversation(std::uint8_t pick) {
  static const Json conversations[] = {
      Json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])"),
      Json::parse(R"([{"role": "system", "content": "sys"}, {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function":
          {"name": "get", "arguments": {"city": "Zürich", "n": 2.5, "ok": true, "list": [1, null]}}}]},
        {"role": "tool", "content": "21"}, {"role": "assistant", "content": "21 °C"}])"),
      Json::parse(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
        {"role": "assistant", "reasoning_content": "think", "content": "b\n"}])"),
      [] {
        Json many = Json::array();
        for (int i = 0; i < 64; ++i) many.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(i, 'x')}});
        return many;
      }(),
  };
  return conversations[pick % 4];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string source(reinterpret_cast<const char*>(data) + 1, size - 1);
  hpctrain::chat::RenderOptions options;
  options.limits.max_bytes = 1 << 20;
  options.limits.max_steps = 200000;
  options.now = std::tm{};
  static const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const Json special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  hpctrain::fuzz::expect_errors([&] {
    const hpctrain::chat::Template compiled(source, "fuzz.jinja");
    const Json variables = hpctrain::chat::template_variables(conversation(data[0]), data[0] & 4 ? tools : Json(),
                                                              (data[0] & 8) != 0, special, Json::object(), "fuzz");
    const auto first = compiled.render(variables, options);
    HPCTRAIN_FUZZ_ASSERT(first.text.size() <= options.limits.max_bytes, "the output passed the byte limit");
    for (const auto& span : first.generation)
      HPCTRAIN_FUZZ_ASSERT(span.begin <= span.end && span.end <= first.text.size(), "a generation span outside the text");
    const auto second = compiled.render(variables, options);
    HPCTRAIN_FUZZ_ASSERT(second.text == first.text && second.generation.size() == first.generation.size(),
                         "two renderings differ");
  });
  return 0;
}
