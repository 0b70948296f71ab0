// Shared option parsing of the subcommands: flags, positional words, --help and --config FILE.
#include "option_parsing.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "hpctrain/core/error.hpp"

namespace hpctrain::cli {
namespace {

// Positional words beyond the declared ones land here, so that they are reported by name.
constexpr const char* kStrayWords = "stray-words";

// The option `word` follows in args (the one a stray value most likely belongs to), or "".
std::string option_before(const std::vector<std::string>& args, const std::string& word) {
  const auto at = std::find(args.begin(), args.end(), word);
  for (auto it = at; it != args.begin();)
    if ((--it)->rfind("-", 0) == 0) return *it;
  return "";
}

// A word that is neither an option, an option's value nor a declared positional argument is an error:
// Program_options would drop it, so `--skip-nonfinite false` would turn skipping ON.
void reject_stray_words(const po::parsed_options& parsed, const std::vector<std::string>& args) {
  for (const po::option& option : parsed.options) {
    const bool stray = option.string_key.empty() || option.string_key == kStrayWords;
    if (!stray || option.original_tokens.empty()) continue;
    const std::string& word = option.original_tokens.front();
    const std::string before = option_before(args, word);
    fail(
        "unexpected word '{}'{}: every option takes at most one value, and switches take none (write "
        "--flag, not --flag true/false)",
        word, before.empty() ? "" : fmt::format(" after {}", before));
  }
}

// Levenshtein distance between a and b.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// " (did you mean --NAME?)" for the declared option nearest to `typed` (a misspelling: at most a third of its
// letters off, or a prefix of it), else "".
std::string did_you_mean(const std::string& typed, const po::options_description& options) {
  std::string word = typed;
  while (!word.empty() && word.front() == '-') word.erase(word.begin());
  const std::string key = word.substr(0, word.find('='));
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const auto& option : options.options()) {
    const std::string& name = option->long_name();
    if (name.empty() || name == kStrayWords) continue;
    const std::size_t distance = name.rfind(key, 0) == 0 && !key.empty() ? 1 : edit_distance(key, name);
    if (distance < best_distance) best = name, best_distance = distance;
  }
  return best.empty() ? "" : fmt::format(" (did you mean --{}?)", best);
}

void read_config_file(const std::string& path, po::options_description& options, po::variables_map& values) {
  std::error_code error;
  HPCTRAIN_CHECK(std::filesystem::exists(path, error), "--config '{}': no such file", path);
  HPCTRAIN_CHECK(std::filesystem::is_regular_file(path, error),
                 "--config '{}' is not a regular file (a directory?): "
                 "expected a file of `key = value` lines",
                 path);
  std::ifstream file(path);
  HPCTRAIN_CHECK(file.good(), "--config '{}' cannot be opened", path);
  try {
    po::store(po::parse_config_file(file, options), values);
  } catch (const po::unknown_option& e) {
    fail("--config '{}': {}{}", path, e.what(), did_you_mean(e.get_option_name(), options));
  } catch (const po::error& e) {
    fail("--config '{}': {}", path, e.what());
  }
}

}  // namespace

bool parse_options(const std::vector<std::string>& args, const std::string& usage, po::options_description& options,
                   po::variables_map& values, const po::positional_options_description* positional) {
  po::options_description general("General");
  general.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(), "read options from a file of `key = value` lines (command line wins)");
  po::options_description stray;
  stray.add_options()(kStrayWords, po::value<std::vector<std::string>>());
  po::options_description all, visible;
  all.add(options).add(general).add(stray);
  visible.add(options).add(general);
  po::positional_options_description words = positional ? *positional : po::positional_options_description();
  words.add(kStrayWords, -1);
  try {
    po::command_line_parser parser(args);
    parser.options(all).positional(words);
    const po::parsed_options parsed = parser.run();
    reject_stray_words(parsed, args);
    po::store(parsed, values);
    if (values.count("help")) {
      std::cout << usage << "\n\n" << visible << "\n";
      return false;
    }
    if (values.count("config")) read_config_file(values["config"].as<std::string>(), options, values);
    po::notify(values);
  } catch (const po::unknown_option& e) {
    fail("{}{}\n  usage: {}\n  hint: run with --help to list the options", e.what(), did_you_mean(e.get_option_name(), all),
         usage);
  } catch (const po::error& e) {
    fail("{}\n  usage: {}\n  hint: run with --help to list the options", e.what(), usage);
  }
  return true;
}

po::options_description quantize_base_group(QuantizeBaseFlags& f) {
  po::options_description g("QLoRA");
  g.add_options()
      ("quantize-base", po::value(&f.type), "nf4 | fp4: hold the frozen base's linear layers in 4-bit form, quantized "
       "at load as bitsandbytes' quantize_4bit does (QLoRA; needs LoRA: --lora-r, or --adapter)")
      ("double-quant", po::bool_switch(&f.double_quant), "quantize the 4-bit blocks' absmax values to 8 bits too "
       "(bitsandbytes' compress_statistics; the default)")
      ("no-double-quant", po::bool_switch(&f.no_double_quant), "keep the blocks' absmax values in float32")
      ("quant-blocksize", po::value(&f.blocksize)->default_value(f.blocksize), "weights per absmax block: a power of "
       "two from 32 to 4096")
      ("quantize-embeddings", po::bool_switch(&f.embeddings), "also hold the token embedding and the LM head in 4-bit "
       "form (transformers' bitsandbytes quantizer keeps them in full precision)");
  return g;
}

std::optional<models::Quant4Options> quantize_base_options(const QuantizeBaseFlags& f) {
  HPCTRAIN_CHECK(!(f.double_quant && f.no_double_quant), "--double-quant and --no-double-quant: give one of them");
  if (f.type.empty()) {
    HPCTRAIN_CHECK(!f.double_quant && !f.no_double_quant && f.blocksize == QuantizeBaseFlags{}.blocksize && !f.embeddings,
                   "--double-quant, --no-double-quant, --quant-blocksize and --quantize-embeddings need --quantize-base "
                   "nf4|fp4");
    return std::nullopt;
  }
  const models::Quant4Options options{models::parse_quant4_type(f.type, "--quantize-base"), f.blocksize,
                                      !f.no_double_quant, f.embeddings};
  models::check_quant4_blocksize(options.blocksize);
  return options;
}

}  // namespace hpctrain::cli
