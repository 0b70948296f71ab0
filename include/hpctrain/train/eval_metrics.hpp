// What an evaluation reports, whatever the objective (Note [Objectives]): the mean loss, the examples, and
// the objective's named scores in order. The log sinks (metrics.jsonl, the terminal, TensorBoard) and
// trainer_state.json's log_history write these, so a new objective needs no edit of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hpctrain::train {

struct Score {
  std::string key;    // metrics.jsonl "eval_<key>", TensorBoard "eval/<key>": "accuracy", "macro_f1"
  std::string label;  // on the terminal: "accuracy", "macro-F1"
  double value = 0;
};

struct EvalMetrics {
  double loss = 0;       // mean loss over what the objective counts (rows, tokens)
  int64_t examples = 0;  // examples evaluated, over all ranks
  std::vector<Score> scores;

  // The score named `key`; nullopt when the objective reports none of that name.
  [[nodiscard]] std::optional<double> score(const std::string& key) const {
    for (const Score& s : scores)
      if (s.key == key) return s.value;
    return std::nullopt;
  }
};

}  // namespace hpctrain::train
