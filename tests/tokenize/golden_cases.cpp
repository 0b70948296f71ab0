// Golden case loading and small helpers shared by the tokenize tests.
#include "golden_cases.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace hpctrain::tokenize::testing {
namespace {

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + file.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes += char(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

GoldenCase parse_case(const nlohmann::json& j, size_t line) {
  GoldenCase c;
  c.line = line;
  c.variant = j.at("variant").get<std::string>();
  if (j.contains("text")) c.text = j["text"].get<std::string>();
  if (j.contains("text_file")) c.text = read_text(kGoldenDir / j["text_file"].get<std::string>());
  if (j.contains("text_hex")) {
    c.text = from_hex(j["text_hex"].get<std::string>());
    c.replaced = from_hex(j.at("replaced_hex").get<std::string>());
  }
  if (j.contains("text_pair")) c.text_pair = j["text_pair"].get<std::string>();
  c.max_length = j.at("max_length").get<int>();
  c.input_ids = j.at("input_ids").get<std::vector<int32_t>>();
  c.token_type_ids = j.at("token_type_ids").get<std::vector<uint8_t>>();
  return c;
}

}  // namespace

std::vector<GoldenCase> load_golden_cases() {
  std::ifstream in(kGoldenDir / "cases.jsonl");
  if (!in) throw std::runtime_error("cannot open " + (kGoldenDir / "cases.jsonl").string());
  std::vector<GoldenCase> cases;
  std::string line;
  for (size_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty()) cases.push_back(parse_case(nlohmann::json::parse(line), number));
  }
  return cases;
}

std::string escaped(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7f && c != '\\') out += char(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  return out.size() > 400 ? out.substr(0, 400) + "..." : out;
}

std::string describe_ids(const BertTokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string numbers, tokens;
  for (int32_t id : ids) {
    numbers += fmt::format("{}{}", numbers.empty() ? "" : " ", id);
    const bool known = id >= 0 && size_t(id) < tokenizer.vocab().size();
    tokens += fmt::format("{}{}", tokens.empty() ? "" : " ", known ? escaped(tokenizer.vocab().token(id)) : "?");
  }
  return "[" + numbers + "] = " + tokens;
}

std::map<std::string, BertTokenizer> bert_variants() {
  const Vocab vocab = Vocab::from_file(kBertDir / "vocab.txt");
  auto make = [&](bool lower, std::optional<bool> strip) {
    TokenizerConfig config;
    config.do_lower_case = lower;
    config.strip_accents = strip;
    return BertTokenizer(vocab, config);
  };
  std::map<std::string, BertTokenizer> variants;
  variants.emplace("uncased", BertTokenizer::from_pretrained(kBertDir));
  variants.emplace("cased", make(false, false));
  variants.emplace("strip_cased", make(false, true));
  variants.emplace("lower_keep_accents", make(true, false));
  return variants;
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  path_ = std::filesystem::temp_directory_path() /
          fmt::format("hpctrain_tokenize_test_{}_{}", ::getpid(), counter.fetch_add(1));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::filesystem::path TempDir::write(const std::string& name, const std::string& contents) const {
  const auto file = path_ / name;
  std::ofstream(file, std::ios::binary) << contents;
  return file;
}

}  // namespace hpctrain::tokenize::testing
