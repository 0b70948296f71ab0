// A Jinja engine for chat templates: renders a template to exactly the text transformers' apply_chat_template
// renders (jinja2 with transformers' environment: trim_blocks, lstrip_blocks, loopcontrols, {% generation %},
// raise_exception, strftime_now, transformers' tojson), with values as JSON.
//
// It implements the Jinja that real chat templates use (docs/chat.md lists it); a construct it does not implement
// is refused when the template is parsed, naming the template, the line and the construct, never rendered into a
// different text. Rendering is bounded (RenderLimits): a template that loops without end or builds gigabytes stops
// with an error naming the template. Thread-safe: one Template may render on many threads at once.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpctrain/core/error.hpp"

namespace hpctrain::chat {

using Json = nlohmann::ordered_json;

// A template's own error: what raise_exception() raised, or what Jinja raises while rendering (an undefined value
// used, a type error). The message names the template and the line.
class TemplateError : public Error {
 public:
  using Error::Error;
};

struct RenderLimits {
  // The longest text the template may build: its output, and any string, list or dict it computes (bytes).
  std::size_t max_bytes = std::size_t{64} << 20;
  // Work units: statements, loop iterations, calls, and one per KiB of data a step copies.
  int64_t max_steps = 5'000'000;
  int max_call_depth = 200;  // nested macro calls (Python's recursion limit stops jinja2 near there)
};

// The bytes of the output a {% generation %} block rendered: [begin, end).
struct GenerationSpan {
  std::size_t begin = 0;
  std::size_t end = 0;
};

struct Rendered {
  std::string text;
  std::vector<GenerationSpan> generation;  // in the order the blocks ended
};

struct RenderOptions {
  RenderLimits limits;
  std::optional<std::tm> now;  // what strftime_now() formats; default: the local time at the call
};

class Template {
 public:
  // Parses `source`. `name` names the template in every error (its file). Throws Error for a syntax error or an
  // unsupported construct.
  Template(std::string_view source, std::string name);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with `variables` (a JSON object: messages, tools, add_generation_prompt, bos_token, ...) as the
  // template's globals. Throws TemplateError (a template error, raise_exception) or Error (a limit, an unsupported
  // value), naming the template and the line.
  [[nodiscard]] Rendered render(const Json& variables, const RenderOptions& options = {}) const;

  [[nodiscard]] const std::string& name() const;
  [[nodiscard]] bool has_generation() const;  // whether the template marks assistant output with {% generation %}

 private:
  struct Parsed;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace hpctrain::chat
