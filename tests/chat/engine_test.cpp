// The chat template engine on hostile templates (refused constructs, endless loops, gigabytes, raise_exception),
// concurrent rendering, and how a tokenizer folder's template and special tokens are found.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <thread>

#include "../error_capture.hpp"
#include "hpctrain/chat/chat_inputs.hpp"
#include "hpctrain/chat/template.hpp"

namespace {

namespace fs = std::filesystem;
using hpctrain::chat::Json;
using hpctrain::chat::RenderOptions;
using hpctrain::chat::Template;
using hpctrain::chat::TemplateError;
using hpctrain::testing::contains;
using hpctrain::testing::error_message;

std::string render(const std::string& source, const Json& variables = Json::object(), const RenderOptions& options = {}) {
  return Template(source, "t.jinja").render(variables, options).text;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("hpctrain-chat-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name) << text; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(unsupported_constructs_are_refused_naming_template_line_and_construct) {
  const std::pair<const char*, const char*> cases[] = {
      {"a\nb\n{% include 'other.jinja' %}", "{% include %}"},
      {"{% extends 'base' %}", "{% extends %}"},
      {"\n{% for x in xs recursive %}{% endfor %}", "a recursive for loop"},
      {"{{ f(*args) }}", "*args or **kwargs"},
      {"x\n{{ text|wordwrap(10) }}", "the filter 'wordwrap'"},
      {"{{ text|groupby('a') }}", "the filter 'groupby'"},
      {"{{ 0x1F }}", "hexadecimal"},
  };
  for (const auto& [source, construct] : cases) {
    const std::string message = error_message([&] { (void)Template(source, "model/chat_template.jinja"); });
    BOOST_TEST_INFO(source);
    BOOST_CHECK(contains(message, "model/chat_template.jinja line "));
    BOOST_CHECK_MESSAGE(contains(message, construct), message);
  }
  // The line is the construct's line.
  BOOST_CHECK(contains(error_message([] { (void)Template("a\nb\n{% include 'x' %}", "t"); }), "t line 3:"));
  // A construct refused while rendering also names the template and line.
  const std::string stored = error_message([] { (void)render("{% set xs = [missing] %}"); });
  BOOST_CHECK_MESSAGE(contains(stored, "t.jinja line 1") && contains(stored, "unsupported construct"), stored);
}

BOOST_AUTO_TEST_CASE(templates_that_never_end_are_stopped) {
  // Endless recursion: the call depth.
  const std::string recursion =
      error_message([] { (void)render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"); });
  BOOST_CHECK_MESSAGE(contains(recursion, "t.jinja line 1") && contains(recursion, "nested deeper than 200"), recursion);
  // 10^10 iterations: the step budget.
  const std::string loops = error_message([] {
    (void)render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  });
  BOOST_CHECK_MESSAGE(contains(loops, "t.jinja line 1") && contains(loops, "steps"), loops);
}

BOOST_AUTO_TEST_CASE(templates_that_render_gigabytes_are_stopped) {
  const std::string repeat = error_message([] { (void)render("{{ 'x' * 10000000000 }}"); });
  BOOST_CHECK_MESSAGE(contains(repeat, "t.jinja line 1") && contains(repeat, "more than 67108864 bytes"), repeat);
  RenderOptions small;
  small.limits.max_bytes = 1 << 20;
  const std::string doubling = error_message([&] {
    (void)render("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 Json::object(), small);
  });
  BOOST_CHECK_MESSAGE(contains(doubling, "more than 1048576 bytes"), doubling);
  const std::string output = error_message([&] {
    (void)render("{% for i in range(100000) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}", Json::object(), small);
  });
  BOOST_CHECK_MESSAGE(contains(output, "more than 1048576 bytes"), output);
  const std::string lists = error_message([&] {
    (void)render("{% set ns = namespace(l=['x']) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
                 Json::object(), small);
  });
  BOOST_CHECK_MESSAGE(contains(lists, "more than 1048576 bytes"), lists);
}

BOOST_AUTO_TEST_CASE(raise_exception_is_a_template_error_with_its_message) {
  const Template t("{% if messages[0].role != 'user' %}{{ raise_exception('Roles must alternate') }}{% endif %}", "m.jinja");
  try {
    (void)t.render({{"messages", Json::array({{{"role", "system"}, {"content", "x"}}})}});
    BOOST_FAIL("no error");
  } catch (const TemplateError& error) {
    BOOST_CHECK(contains(error.what(), "m.jinja line 1"));
    BOOST_CHECK(contains(error.what(), "Roles must alternate"));
  }
}

BOOST_AUTO_TEST_CASE(one_template_renders_on_many_threads) {
  const Template t("{% for m in messages %}<{{ m.role }}>{{ m.content|trim }}{% generation %}!{% endgeneration %}"
                   "{% endfor %}", "t");
  Json messages = Json::array();
  for (int i = 0; i < 200; ++i) messages.push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", " m" + std::to_string(i)}});
  const Json variables = {{"messages", messages}};
  const std::string expected = t.render(variables).text;
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < results.size(); ++k)
    threads.emplace_back([&, k] {
      for (int repeat = 0; repeat < 20; ++repeat) results[k] = t.render(variables).text;
    });
  for (auto& thread : threads) thread.join();
  for (const auto& result : results) BOOST_CHECK(result == expected);
}

BOOST_AUTO_TEST_CASE(strftime_now_defaults_to_the_local_time) {
  char today[32];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(today, sizeof today, "%Y-%m-%d", &local);
  const std::string rendered = render("{{ strftime_now('%Y-%m-%d') }}");
  BOOST_CHECK(rendered == today || rendered > today);  // the day may turn between the two calls
}

BOOST_AUTO_TEST_CASE(a_tokenizer_folder_gives_its_template_and_special_tokens) {
  TempDir dir;
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": {"content": "</s>", "__type": "AddedToken"},
    "pad_token": null, "additional_special_tokens": ["<x>"],
    "chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})");
  auto chat = hpctrain::chat::load_tokenizer_chat(dir.path, {}, false);
  BOOST_CHECK_EQUAL(chat.template_source, "D");
  BOOST_CHECK(contains(chat.template_name, "tokenizer_config.json:chat_template[default]"));
  BOOST_CHECK_EQUAL(chat.special_tokens.dump(), R"({"bos_token":"<s>","eos_token":"</s>"})");
  BOOST_CHECK_EQUAL(hpctrain::chat::load_tokenizer_chat(dir.path, {}, true).template_source, "T");
  // chat_template.jinja wins over tokenizer_config.json, an explicit file over both.
  dir.write("chat_template.jinja", "J");
  BOOST_CHECK_EQUAL(hpctrain::chat::load_tokenizer_chat(dir.path, {}, true).template_source, "J");
  dir.write("mine.jinja", "M");
  BOOST_CHECK_EQUAL(hpctrain::chat::load_tokenizer_chat(dir.path, dir.path / "mine.jinja", false).template_source, "M");
  // Malformed input names the file.
  dir.write("tokenizer_config.json", "[1, 2]");
  BOOST_CHECK(contains(error_message([&] { (void)hpctrain::chat::load_tokenizer_chat(dir.path, {}, false); }),
                       "tokenizer_config.json: not a JSON object"));
}

BOOST_AUTO_TEST_CASE(messages_are_normalized_as_transformers_does) {
  const Json messages = Json::parse(R"([{"role": "user", "content": "q", "name": null},
    {"role": "assistant", "content": "a", "reasoning": "r", "tool_calls": null}])");
  const Json normalized = hpctrain::chat::normalize_messages(messages, "row 3");
  BOOST_CHECK_EQUAL(normalized.dump(), R"([{"role":"user","content":"q"},)"
                                       R"({"thinking":"r","role":"assistant","content":"a","reasoning":"r","reasoning_content":"r"}])");
  BOOST_CHECK(contains(error_message([] { (void)hpctrain::chat::normalize_messages(Json::array(), "row 3"); }), "row 3: cannot apply"));
  BOOST_CHECK(contains(error_message([] { (void)hpctrain::chat::normalize_messages(Json::array({"text"}), "row 3"); }),
                       "row 3: message 0 must be an object, got string"));
}
