// Helpers for the models tests: the golden data of tests/models/golden (reference.py) and scratch dirs.
#pragma once

#include "hpctrain/io/hf_config.hpp"
#include "hpctrain/models/model.hpp"
#include "hpctrain/models/registry.hpp"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace hpctrain::models::testing {

inline std::filesystem::path golden_dir() {
  return std::filesystem::path(HPCTRAIN_TEST_DATA_DIR) / "models" / "golden";
}

inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return nlohmann::json::parse(in);
}

// tests/models/golden/golden.json, parsed once.
inline const nlohmann::json& golden() {
  static const nlohmann::json data = read_json(golden_dir() / "golden.json");
  return data;
}

// A freshly initialized model for a config.json object.
inline std::shared_ptr<SequenceClassifier> build(const nlohmann::json& config) {
  return from_config(io::HfConfig::from_json(config));
}

// A nested JSON list of numbers as a tensor of `dtype`.
inline at::Tensor tensor_from_json(const nlohmann::json& rows, at::ScalarType dtype) {
  std::vector<double> values;
  std::vector<int64_t> shape;
  const nlohmann::json* level = &rows;
  while (level->is_array()) {
    shape.push_back(static_cast<int64_t>(level->size()));
    if (level->empty()) break;
    level = &(*level)[0];
  }
  const auto flatten = [&](const auto& self, const nlohmann::json& node) -> void {
    if (node.is_array()) {
      for (const auto& child : node) self(self, child);
    } else {
      values.push_back(node.get<double>());
    }
  };
  flatten(flatten, rows);
  return at::tensor(values, at::kDouble).reshape(shape).to(dtype);
}

// The inputs of one golden case (attention_mask/token_type_ids absent when the case has none).
inline ModelInputs inputs_of(const nlohmann::json& golden_case) {
  ModelInputs inputs;
  inputs.input_ids = tensor_from_json(golden_case.at("input_ids"), at::kLong);
  if (golden_case.contains("attention_mask")) {
    inputs.attention_mask = tensor_from_json(golden_case.at("attention_mask"), at::kLong);
  }
  if (golden_case.contains("token_type_ids")) {
    inputs.token_type_ids = tensor_from_json(golden_case.at("token_type_ids"), at::kLong);
  }
  return inputs;
}

inline double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// A fresh scratch directory, removed when the object goes away.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    path_ = std::filesystem::temp_directory_path() / ("hpctrain-models-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code error;
    std::filesystem::remove_all(path_, error);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace hpctrain::models::testing
