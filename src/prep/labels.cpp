#include "hpctrain/prep/labels.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include "hpctrain/core/error.hpp"

namespace hpctrain::prep {
namespace {
bool parse_integer(const std::string& text, int64_t& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty();
}
}  // namespace

LabelMap::LabelMap(std::vector<std::string> names) : names_(std::move(names)) {
  HPCTRAIN_CHECK(!names_.empty(), "the label set is empty");
  for (std::size_t i = 0; i < names_.size(); ++i) {
    HPCTRAIN_CHECK(!names_[i].empty(), "label {} has an empty name", i);
    const bool inserted = ids_.emplace(names_[i], static_cast<int64_t>(i)).second;
    HPCTRAIN_CHECK(inserted, "label '{}' appears twice in the label list", names_[i]);
  }
}

LabelMap LabelMap::from_values(const std::vector<std::string>& values) {
  std::set<std::string> unique(values.begin(), values.end());
  std::vector<std::string> names(unique.begin(), unique.end());
  std::vector<int64_t> numbers(names.size());
  bool all_integers = true;
  for (std::size_t i = 0; i < names.size() && all_integers; ++i) all_integers = parse_integer(names[i], numbers[i]);
  if (all_integers) {
    std::vector<std::size_t> order(names.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return numbers[a] < numbers[b]; });
    std::vector<std::string> sorted;
    for (std::size_t i : order) sorted.push_back(names[i]);
    names = std::move(sorted);
  }
  return LabelMap(std::move(names));
}

int64_t LabelMap::id(const std::string& name) const {
  auto it = ids_.find(name);
  HPCTRAIN_CHECK(it != ids_.end(), "label '{}' is not in the label set", name);
  return it->second;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::size_t end = comma == std::string::npos ? text.size() : comma;
    std::string part = text.substr(start, end - start);
    while (!part.empty() && part.front() == ' ') part.erase(part.begin());
    while (!part.empty() && part.back() == ' ') part.pop_back();
    if (!part.empty()) parts.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

}  // namespace hpctrain::prep
