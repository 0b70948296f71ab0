// read_byte_level_bpe: a byte-level BPE tokenizer.json (plus tokenizer_config.json), strictly: every component
// outside the supported pipeline (Note [Byte-level BPE pipeline]) is refused, naming the file and the field.
#include "tokenize/byte_level_bpe_parts.hpp"

#include "hpctrain/core/error.hpp"
#include "tokenize/json_fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace hpctrain::tokenize::detail {
namespace {

namespace fs = std::filesystem;

// A field that must be absent, null or equal to its neutral value (false, "" or 0).
void require_neutral(const JsonObject& object, const std::string& field, const std::string& why) {
  if (!object.has(field)) return;
  const auto& value = object.at(field);
  const bool neutral = value == false || value == "" || value == 0;
  if (!neutral) object.fail_field(field, "null (" + why + ")", value);
}

// merges: "left right" strings (tokenizers < 0.20) or ["left", "right"] pairs (newer).
std::vector<std::pair<std::string, std::string>> read_merges(const JsonObject& model) {
  const auto& merges = model.array("merges");
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const auto& merge = merges[i];
    const std::string field = fmt::format("merges[{}]", i);
    if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      pairs.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    const std::string text = merge.is_string() ? merge.get<std::string>() : "";
    const size_t space = text.find(' ');
    if (space == std::string::npos || space == 0 || text.find(' ', space + 1) != std::string::npos ||
        space + 1 == text.size()) {
      model.fail_field(field, "\"left right\" or [\"left\", \"right\"]", merge);
    }
    pairs.emplace_back(text.substr(0, space), text.substr(space + 1));
  }
  return pairs;
}

Bpe read_model(const JsonObject& root) {
  const JsonObject model = root.object("model");
  const std::string type = model.get_string("type", "");
  if (type != "BPE") model.fail_field("type", "\"BPE\" (byte-level BPE; WordPiece loads as BertTokenizer)", type);
  require_neutral(model, "dropout", "BPE dropout is not supported");
  require_neutral(model, "continuing_subword_prefix", "not supported");
  require_neutral(model, "end_of_word_suffix", "not supported");
  require_neutral(model, "byte_fallback", "byte_fallback is not supported");
  BpeOptions options;
  if (model.has("unk_token")) options.unk_token = model.required_string("unk_token");
  options.fuse_unk = model.get_bool("fuse_unk", false);
  options.ignore_merges = model.get_bool("ignore_merges", false);
  Vocab vocab = read_model_vocab(model);
  if (options.unk_token && !vocab.find(*options.unk_token)) {
    model.fail_field("unk_token", "a token of model.vocab", *options.unk_token);
  }
  return Bpe(std::move(vocab), read_merges(model), std::move(options),
             fmt::format("{}: field '{}'", model.file(), model.field_name("merges")));
}

Normalization read_normalizer(const JsonObject& root) {
  if (!root.has("normalizer")) return Normalization::kNone;
  const JsonObject normalizer = root.object("normalizer");
  const std::string type = normalizer.required_string("type");
  if (type != "NFC") normalizer.fail_field("type", "null or \"NFC\" (the normalizers supported for BPE)", type);
  return Normalization::kNfc;
}


std::string origin_of(const JsonObject& object, const std::string& field) {
  return fmt::format("{}: field '{}'", object.file(), object.field_name(field));
}

// ByteLevel as a pre-tokenizer: splits with GPT-2's regex when use_regex, then maps bytes (always last).
void read_byte_level_pre_tokenizer(const JsonObject& step, std::vector<Regex>& splits) {
  if (step.get_bool("add_prefix_space", false)) step.fail_field("add_prefix_space", "false (not supported)", true);
  if (step.get_bool("use_regex", true)) splits.emplace_back(kGpt2Pattern, false, origin_of(step, "use_regex"));
}

void read_split(const JsonObject& step, std::vector<Regex>& splits) {
  const std::string behavior = step.required_string("behavior");
  if (behavior != "Isolated") step.fail_field("behavior", "\"Isolated\" (the only Split behavior supported)", behavior);
  if (step.get_bool("invert", false)) step.fail_field("invert", "false (not supported)", true);
  const JsonObject pattern = step.object("pattern");
  if (pattern.has("Regex")) {
    splits.emplace_back(pattern.required_string("Regex"), false, origin_of(pattern, "Regex"));
  } else if (pattern.has("String")) {
    splits.emplace_back(pattern.required_string("String"), true, origin_of(pattern, "String"));
  } else {
    step.fail_field("pattern", "{\"Regex\": ...} or {\"String\": ...}", pattern.json());
  }
}

// ByteLevel, or Sequence[Split..., ByteLevel]: the byte-level mapping comes last, after every regex split.
std::vector<Regex> read_pre_tokenizer(const JsonObject& root) {
  std::vector<Regex> splits;
  if (!root.has("pre_tokenizer")) root.fail_field("pre_tokenizer", "ByteLevel or Sequence[Split..., ByteLevel]", nullptr);
  const JsonObject pre_tokenizer = root.object("pre_tokenizer");
  const std::string type = pre_tokenizer.required_string("type");
  if (type == "ByteLevel") {
    read_byte_level_pre_tokenizer(pre_tokenizer, splits);
    return splits;
  }
  if (type != "Sequence") pre_tokenizer.fail_field("type", "\"ByteLevel\" or \"Sequence\"", type);
  const auto& steps = pre_tokenizer.array("pretokenizers");
  for (size_t i = 0; i < steps.size(); ++i) {
    const JsonObject step(steps[i], root.file(), pre_tokenizer.field_name(fmt::format("pretokenizers[{}]", i)));
    const std::string step_type = step.required_string("type");
    const bool last = i + 1 == steps.size();
    if (last && step_type == "ByteLevel") {
      read_byte_level_pre_tokenizer(step, splits);
    } else if (!last && step_type == "Split") {
      read_split(step, splits);
    } else {
      step.fail_field("type", last ? "\"ByteLevel\" (last)" : "\"Split\" (before the final ByteLevel)", step_type);
    }
  }
  if (steps.empty()) pre_tokenizer.fail_field("pretokenizers", "Split..., ByteLevel", steps);
  return splits;
}

// The ids of a TemplateProcessing special token, each an id of the tokenizer.
std::vector<int32_t> special_ids(const JsonObject& processor, const std::string& token, size_t vocab_size) {
  const JsonObject specials = processor.object("special_tokens");
  const JsonObject entry = specials.object(token);
  std::vector<int32_t> ids;
  for (const auto& id : entry.array("ids")) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || size_t(id.get<int64_t>()) >= vocab_size) {
      entry.fail_field("ids", fmt::format("ids in [0, {})", vocab_size), id);
    }
    ids.push_back(int32_t(id.get<int64_t>()));
  }
  return ids;
}

// single: special tokens, $A, special tokens; the pair template is not used (no pair encoding).
void read_template_processing(const JsonObject& processor, ByteLevelBpeParts& parts) {
  bool seen_sequence = false;
  for (const auto& item : processor.array("single")) {
    if (item.contains("Sequence") && item["Sequence"].value("id", "") == "A" && !seen_sequence) {
      seen_sequence = true;
    } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
               item["SpecialToken"]["id"].is_string()) {
      const auto ids = special_ids(processor, item["SpecialToken"]["id"].get<std::string>(), parts.vocab_size);
      auto& side = seen_sequence ? parts.suffix_ids : parts.prefix_ids;
      side.insert(side.end(), ids.begin(), ids.end());
    } else {
      processor.fail_field("single", "SpecialToken items around one Sequence $A", item);
    }
  }
  if (!seen_sequence) processor.fail_field("single", "a template with $A", processor.at("single"));
}

void read_post_processor(const JsonObject& root, ByteLevelBpeParts& parts) {
  if (!root.has("post_processor")) return;
  const JsonObject processor = root.object("post_processor");
  const std::string type = processor.required_string("type");
  const auto read_one = [&](const JsonObject& one, const std::string& one_type) {
    if (one_type == "ByteLevel") return;  // changes offsets only, never ids
    if (one_type != "TemplateProcessing") {
      one.fail_field("type", "\"ByteLevel\", \"TemplateProcessing\" or \"Sequence\" of them", one_type);
    }
    if (!parts.prefix_ids.empty() || !parts.suffix_ids.empty()) one.fail_field("type", "one TemplateProcessing", one_type);
    read_template_processing(one, parts);
  };
  if (type != "Sequence") return read_one(processor, type);
  const auto& processors = processor.array("processors");
  for (size_t i = 0; i < processors.size(); ++i) {
    const JsonObject one(processors[i], root.file(), processor.field_name(fmt::format("processors[{}]", i)));
    read_one(one, one.required_string("type"));
  }
}

void read_decoder(const JsonObject& root) {
  if (!root.has("decoder")) root.fail_field("decoder", "{\"type\": \"ByteLevel\"}", nullptr);
  const JsonObject decoder = root.object("decoder");
  const std::string type = decoder.required_string("type");
  if (type != "ByteLevel") decoder.fail_field("type", "\"ByteLevel\" (the decoder supported for BPE)", type);
}


AddedToken read_added_token(const JsonObject& entry, const Vocab& vocab) {
  AddedToken token;
  token.content = entry.required_string("content");
  const int64_t id = entry.get_int("id", -1);
  if (id < 0 || id > std::numeric_limits<int32_t>::max()) entry.fail_field("id", "an id >= 0", entry.at("id"));
  token.id = int32_t(id);
  const auto vocab_id = vocab.find(token.content);
  if (vocab_id ? *vocab_id != token.id : size_t(token.id) < vocab.size()) {
    entry.fail_field("id", vocab_id ? fmt::format("its id in model.vocab ({})", *vocab_id)
                                    : fmt::format("an id past model.vocab (>= {})", vocab.size()), id);
  }
  for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
    if (entry.get_bool(flag, false)) entry.fail_field(flag, "false (not supported)", true);
  }
  token.special = entry.get_bool("special", false);
  token.normalized = entry.get_bool("normalized", !token.special);
  return token;
}

AddedTokens read_added_tokens(const JsonObject& root, const Vocab& vocab, size_t& vocab_size) {
  std::vector<AddedToken> tokens;
  vocab_size = vocab.size();
  if (!root.has("added_tokens")) return AddedTokens();
  const auto& entries = root.array("added_tokens");
  for (size_t i = 0; i < entries.size(); ++i) {
    const JsonObject entry(entries[i], root.file(), fmt::format("added_tokens[{}]", i));
    tokens.push_back(read_added_token(entry, vocab));
    for (size_t j = 0; j + 1 < tokens.size(); ++j) {
      if (tokens[j].id == tokens.back().id && tokens[j].content != tokens.back().content) {
        entry.fail_field("id", fmt::format("an id not used by added_tokens[{}]", j), tokens.back().id);
      }
    }
    vocab_size = std::max(vocab_size, size_t(tokens.back().id) + 1);
  }
  return AddedTokens(std::move(tokens));
}

// tokenizer_config.json: bos_token and eos_token; add_bos_token / add_eos_token would make transformers rebuild
// the post-processor for some tokenizer classes, so they are refused rather than ignored.
void read_config(const fs::path& config_json, ByteLevelBpeParts& parts) {
  const nlohmann::json json = read_json_file(config_json);
  const JsonObject config(json, config_json.string(), "");
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    if (config.get_bool(flag, false)) config.fail_field(flag, "false or absent (tokenizer.json's post_processor decides)", true);
  }
  const auto id_of = [&](const char* field) -> std::optional<int32_t> {
    const std::string token = config.get_token(field, "");
    if (token.empty()) return std::nullopt;
    if (const AddedToken* added = parts.added_tokens.find_content(token)) return added->id;
    if (const auto id = parts.bpe.vocab().find(token)) return *id;
    config.fail_field(field, "a token of tokenizer.json", token);
  };
  parts.bos_id = id_of("bos_token");
  parts.eos_id = id_of("eos_token");
}

}  // namespace

ByteLevelBpeParts read_byte_level_bpe(const fs::path& tokenizer_json, const std::optional<fs::path>& config_json) {
  const nlohmann::json json = read_json_file(tokenizer_json);
  const JsonObject root(json, tokenizer_json.string(), "");
  require_neutral(root, "truncation", "set truncation in hpctrain, not in tokenizer.json");
  require_neutral(root, "padding", "set padding in hpctrain, not in tokenizer.json");
  ByteLevelBpeParts parts(read_model(root));
  parts.added_tokens = read_added_tokens(root, parts.bpe.vocab(), parts.vocab_size);
  parts.normalization = read_normalizer(root);
  parts.splits = read_pre_tokenizer(root);
  read_post_processor(root, parts);
  read_decoder(root);
  parts.files.push_back(tokenizer_json);
  if (config_json) {
    read_config(*config_json, parts);
    parts.files.push_back(*config_json);
  }
  return parts;
}

}  // namespace hpctrain::tokenize::detail
