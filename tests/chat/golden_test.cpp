// The chat template engine against transformers 5.24 (goldens by tests/chat/make_goldens.py): every template of the
// trl wheel on every conversation, both add_generation_prompt values, byte for byte, with the {% generation %} spans
// transformers reports; a template that refuses a conversation in transformers is refused here too. Then the
// construct snippets, rendered by jinja2 in transformers' environment.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "hpctrain/chat/chat_inputs.hpp"
#include "hpctrain/chat/template.hpp"

namespace {

using hpctrain::chat::GenerationSpan;
using hpctrain::chat::Json;
using hpctrain::chat::RenderOptions;
using hpctrain::chat::Template;

const std::string kDir = std::string(HPCTRAIN_TEST_DATA_DIR) + "/chat/";

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The instant the goldens' strftime_now() renders: 2025-01-02 03:04:05 (a Thursday).
RenderOptions fixed_now() {
  std::tm now{};
  now.tm_year = 125, now.tm_mon = 0, now.tm_mday = 2, now.tm_hour = 3, now.tm_min = 4, now.tm_sec = 5;
  now.tm_wday = 4, now.tm_yday = 1;
  RenderOptions options;
  options.now = now;
  return options;
}

Json spans_json(const std::vector<GenerationSpan>& spans) {
  Json out = Json::array();
  for (const auto& span : spans) out.push_back({span.begin, span.end});
  return out;
}

// Where two texts first differ, for the failure message.
std::string first_difference(const std::string& want, const std::string& got) {
  std::size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const std::size_t from = i > 40 ? i - 40 : 0;
  const auto quoted = [](const std::string& s) { return Json(s).dump(-1, ' ', false, Json::error_handler_t::replace); };
  return "at byte " + std::to_string(i) + ": want " + quoted(want.substr(from, 100)) + ", got " + quoted(got.substr(from, 100));
}

struct Outcome {
  std::string text, error;
  Json spans;
};

// Checks one case: an expected error must be an error, an expected text the same bytes and spans.
void check(const std::string& label, const Json& expected, const Outcome& got) {
  if (expected.contains("error")) {
    BOOST_CHECK_MESSAGE(!got.error.empty(), label << ": transformers raised " << expected["error"] << ", hpctrain rendered "
                                                  << got.text.substr(0, 200));
    return;
  }
  BOOST_REQUIRE_MESSAGE(got.error.empty(), label << ": " << got.error);
  const std::string& want = expected["text"].get_ref<const std::string&>();
  if (got.text != want) BOOST_ERROR(label << ": " << first_difference(want, got.text));
  BOOST_CHECK_MESSAGE(got.spans == expected["generation"],
                      label << ": generation spans " << got.spans.dump() << ", want " << expected["generation"].dump());
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_trl_template_renders_as_transformers) {
  const Json conversations = Json::parse(read(kDir + "conversations.json"));
  const Json goldens = Json::parse(read(kDir + "render_goldens.json"));
  const RenderOptions options = fixed_now();
  std::map<std::string, std::unique_ptr<Template>> templates;
  std::size_t rendered = 0, refused = 0;
  for (const Json& golden : goldens["cases"]) {
    const std::string name = golden["template"];
    const std::string label = name + " / " + golden["conversation"].get<std::string>() + " / add_generation_prompt=" +
                              (golden["add_generation_prompt"].get<bool>() ? "true" : "false");
    auto& compiled = templates[name];
    if (!compiled) {
      try {
        compiled = std::make_unique<Template>(read(kDir + "templates/" + name), name);
      } catch (const std::exception& error) {
        BOOST_FAIL(name << " does not parse: " << error.what());
      }
    }
    const Json& conversation = conversations["conversations"][golden["conversation"].get<std::string>()];
    Outcome got;
    try {
      const Json variables = hpctrain::chat::template_variables(
          conversation["messages"], conversation.value("tools", false) ? conversations["tools"] : Json(nullptr),
          golden["add_generation_prompt"].get<bool>(), conversations["special_tokens"],
          conversation.value("kwargs", Json::object()), label);
      const auto result = compiled->render(variables, options);
      got.text = result.text;
      got.spans = spans_json(result.generation);
    } catch (const std::exception& error) {
      got.error = error.what();
    }
    check(label, golden, got);
    (golden.contains("error") ? refused : rendered) += 1;
  }
  BOOST_TEST_MESSAGE(templates.size() << " templates: " << rendered << " renders equal, " << refused << " refused alike");
  BOOST_CHECK_GE(templates.size(), 70u);
  BOOST_CHECK_GE(rendered, 900u);
}

BOOST_AUTO_TEST_CASE(construct_snippets_render_as_jinja2) {
  const Json snippets = Json::parse(read(kDir + "snippets.json"));
  const RenderOptions options = fixed_now();
  for (const Json& snippet : snippets["cases"]) {
    Outcome got;
    try {
      const Template compiled(snippet["template"].get<std::string>(), snippet["name"].get<std::string>());
      const auto result = compiled.render(snippet["variables"], options);
      got.text = result.text;
      got.spans = spans_json(result.generation);
    } catch (const std::exception& error) {
      got.error = error.what();
    }
    check(snippet["name"].get<std::string>(), snippet, got);
  }
}
