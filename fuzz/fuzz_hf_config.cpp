// libFuzzer target: HfConfig::load on an arbitrary config.json. Either Error, or a config that validates,
// saves, and loads back to the same JSON text (a round trip keeps every key).
#include "fuzz_util.hpp"
#include "hpctrain/io/hf_config.hpp"

using hpctrain::io::HfConfig;

namespace {

void touch_typed(const HfConfig& config) {
  if (std::holds_alternative<hpctrain::io::DistilBertConfig>(config.model)) (void)config.distilbert().activation_fn();
  if (std::holds_alternative<hpctrain::io::BertConfig>(config.model)) (void)config.bert().activation_fn();
  if (std::holds_alternative<hpctrain::io::CnnConfig>(config.model)) (void)config.cnn();
  if (std::holds_alternative<hpctrain::io::MlpConfig>(config.model)) (void)config.mlp();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hpctrain::fuzz::TempFile file("config.json");
  static const hpctrain::fuzz::TempFile saved("saved-config.json");
  file.write(data, size);
  std::string text;
  hpctrain::fuzz::expect_errors([&] {
    const HfConfig config = HfConfig::load(file.path());
    touch_typed(config);
    text = config.to_json_string();
  });
  if (text.empty()) return 0;
  // An accepted config must survive save + load unchanged; an Error here is a finding.
  saved.write(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  try {
    const HfConfig again = HfConfig::load(saved.path());
    HPCTRAIN_FUZZ_ASSERT(again.to_json_string() == text, "save -> load changed the config:\n" + text);
  } catch (const hpctrain::Error& error) {
    hpctrain::fuzz::finding(std::string("a saved config does not load back: ") + error.what() + "\n" + text);
  }
  return 0;
}
