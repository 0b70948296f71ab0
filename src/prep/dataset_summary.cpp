#include "hpctrain/prep/dataset_summary.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "hpctrain/data/dataset_reader.hpp"

namespace hpctrain::prep {
namespace {

nlohmann::json length_statistics(std::vector<int64_t> lengths) {
  if (lengths.empty()) return nullptr;
  std::sort(lengths.begin(), lengths.end());
  // Nearest-rank percentile on the sorted lengths.
  auto percentile = [&](double p) {
    const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(lengths.size())));
    return lengths[std::min(lengths.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  double sum = 0;
  for (int64_t length : lengths) sum += static_cast<double>(length);
  return {{"min", lengths.front()}, {"median", percentile(50)}, {"p95", percentile(95)}, {"max", lengths.back()},
          {"mean", sum / static_cast<double>(lengths.size())}};
}

nlohmann::json split_summary(const data::DatasetReader& reader, const std::string& name, bool validate) {
  const data::SplitInfo info = reader.split_info(name);
  nlohmann::json split = {{"name", name}, {"num_examples", info.num_examples}};
  const auto& label_names = reader.label_names();
  std::vector<int64_t> counts(label_names.size(), 0);
  if (data::has_labels(reader.task())) {
    for (int64_t label : reader.read_labels(name, 0, info.num_examples)) {
      if (label >= 0 && label < static_cast<int64_t>(counts.size())) ++counts[static_cast<std::size_t>(label)];
    }
  }
  nlohmann::json histogram = nlohmann::json::array();  // empty for causal-lm
  for (std::size_t i = 0; i < counts.size(); ++i) histogram.push_back({{"label", label_names[i]}, {"count", counts[i]}});
  split["label_histogram"] = histogram;
  if (data::is_text_task(reader.task())) {
    split["num_tokens"] = info.num_tokens;
    split["has_token_type_ids"] = info.has_token_type_ids;
    split["has_document_starts"] = info.has_document_starts;
    if (info.has_loss_mask) split["has_loss_mask"] = true;
    split["length"] = length_statistics(reader.read_lengths(name));
    // causal-lm: the share of the rows' capacity (tokenizer max_length, the longest a row may be) holding tokens.
    const auto capacity = reader.tokenizer().value("max_length", nlohmann::json());
    if (reader.task() == data::Task::causal_lm && capacity.is_number_integer() && capacity.get<int64_t>() > 0 &&
        info.num_examples > 0)
      split["fill"] = static_cast<double>(info.num_tokens) /
                      (static_cast<double>(info.num_examples) * static_cast<double>(capacity.get<int64_t>()));
  } else {
    split["image"] = {{"channels", info.channels}, {"height", info.height}, {"width", info.width},
                      {"mean", info.mean}, {"std", info.std}};
  }
  if (validate) {
    reader.validate_split(name);
    split["valid"] = true;
  }
  return split;
}

}  // namespace

nlohmann::json summarize_dataset(const std::filesystem::path& path, bool validate) {
  const data::DatasetReader reader(path);
  nlohmann::json summary = {{"file", path.string()},
                            {"hpctrain_format", data::schema::kFormatVersion},
                            {"task", std::string(data::to_string(reader.task()))},
                            {"label_names", reader.label_names()},
                            {"source", reader.source()},
                            {"created_by", reader.created_by()},
                            {"tokenizer", reader.tokenizer()},
                            {"splits", nlohmann::json::array()}};
  for (const auto& name : reader.splits()) summary["splits"].push_back(split_summary(reader, name, validate));
  return summary;
}

std::string format_dataset_summary(const nlohmann::json& summary) {
  std::string out = fmt::format("{}\n  format      hpctrain HDF5 schema v{}\n  task        {}\n",
                                summary["file"].get<std::string>(), summary["hpctrain_format"].get<int>(),
                                summary["task"].get<std::string>());
  if (summary["label_names"].empty())
    out += "  labels      none (token rows for a causal language model)\n";
  else
    out += fmt::format("  labels      {} ({})\n", summary["label_names"].size(),
                       fmt::join(summary["label_names"].get<std::vector<std::string>>(), ", "));
  out += fmt::format("  source      {}\n  created by  {}\n", summary["source"].get<std::string>(),
                     summary["created_by"].get<std::string>());
  const auto& tokenizer = summary["tokenizer"];
  if (tokenizer.is_object() && !tokenizer.empty()) out += fmt::format("  tokenizer   {}\n", tokenizer.dump());
  for (const auto& split : summary["splits"]) {
    out += fmt::format("\n  split '{}': {} examples", split["name"].get<std::string>(), split["num_examples"].get<int64_t>());
    if (split.contains("num_tokens"))
      out += fmt::format(", {} tokens{}{}{}", split["num_tokens"].get<int64_t>(),
                         split["has_token_type_ids"].get<bool>() ? ", sentence pairs" : "",
                         split.value("has_document_starts", false) ? ", rows of several documents (boundaries kept)" : "",
                         split.value("has_loss_mask", false) ? ", a loss mask (prep sft)" : "");
    out += "\n";
    if (split.contains("fill"))
      out += fmt::format("    fill: {:.1f} % (tokens / (rows x max_length {}))\n", 100.0 * split["fill"].get<double>(),
                         summary["tokenizer"]["max_length"].get<int64_t>());
    if (split.contains("length") && !split["length"].is_null()) {
      const auto& length = split["length"];
      out += fmt::format("    tokens per example: min {}  median {}  p95 {}  max {}  mean {:.1f}\n", length["min"].get<int64_t>(),
                         length["median"].get<int64_t>(), length["p95"].get<int64_t>(), length["max"].get<int64_t>(),
                         length["mean"].get<double>());
    }
    if (split.contains("image")) {
      const auto& image = split["image"];
      out += fmt::format("    images {}x{}x{}  mean {:.4f}  std {:.4f}\n", image["channels"].get<int64_t>(),
                         image["height"].get<int64_t>(), image["width"].get<int64_t>(),
                         fmt::join(image["mean"].get<std::vector<double>>(), ","),
                         fmt::join(image["std"].get<std::vector<double>>(), ","));
    }
    const int64_t total = std::max<int64_t>(1, split["num_examples"].get<int64_t>());
    for (const auto& entry : split["label_histogram"]) {
      const int64_t count = entry["count"].get<int64_t>();
      out += fmt::format("    {:<24} {:>8}  {:5.1f}%\n", entry["label"].get<std::string>(), count, 100.0 * count / total);
    }
    if (split.contains("valid")) out += "    validation: ok\n";
  }
  return out;
}

}  // namespace hpctrain::prep
