// The label set of a classification dataset: names in a fixed order, name → id.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace hpctrain::prep {

class LabelMap {
 public:
  // A forced order (--labels a,b,c); duplicates → Error.
  explicit LabelMap(std::vector<std::string> names);
  // The sorted unique values: numerically when every value is an integer ("2" < "10"), else by bytes.
  static LabelMap from_values(const std::vector<std::string>& values);

  // Id of a label name; Error when it is not in the set.
  int64_t id(const std::string& name) const;
  bool contains(const std::string& name) const { return ids_.count(name) != 0; }
  const std::vector<std::string>& names() const { return names_; }
  std::size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::unordered_map<std::string, int64_t> ids_;
};

// Splits "a,b,c" at commas (no escaping; label names with commas need a file-based order later).
std::vector<std::string> split_commas(const std::string& text);

}  // namespace hpctrain::prep
