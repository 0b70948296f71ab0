#include "hpctrain/data/dataset_reader.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include <fmt/ranges.h>

#include "h5_handle.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::data {
namespace {

// Validation reads at most this many examples (text) or bytes of pixels (images) at a time.
constexpr int64_t kValidateExamples = 64 * 1024;
constexpr int64_t kValidateImageBytes = 64 << 20;
// read_*_indices reads one hyperslab across a gap of up to this many unwanted examples rather than two.
constexpr int64_t kMaxIndexGap = 16;
// read_lengths reads offsets in pieces of this many elements.
constexpr int64_t kOffsetPiece = 1 << 20;

std::string format_dims(const std::vector<int64_t>& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

// The datasets of one split, opened once, with their dtypes and sizes checked (Impl::split).
struct OpenSplit {
  SplitInfo info;
  std::string where;  // "<file>:/<split>", the prefix of every message
  h5::Handle group, input_ids, offsets, token_type_ids, document_start, loss_mask, labels, source_index, pixels;

  [[nodiscard]] std::string at(const char* dataset) const { return fmt::format("{}/{}", where, dataset); }
};

// Opens `name` and checks its element type, rank and the sizes that are known (-1: any).
h5::Handle open_checked(const OpenSplit& split, const char* name, h5::Type type, const std::vector<int64_t>& dims) {
  h5::Handle dataset = h5::open_dataset(split.group.get(), name);
  const h5::DatasetDescription stored = h5::describe_dataset(dataset.get());
  bool shape_ok = stored.dims.size() == dims.size();
  for (size_t i = 0; shape_ok && i < dims.size(); ++i) {
    shape_ok = dims[i] < 0 || stored.dims[i] == dims[i];
  }
  std::vector<std::string> expected_dims;
  for (int64_t dim : dims) expected_dims.push_back(dim >= 0 ? std::to_string(dim) : "any");
  HPCTRAIN_CHECK(stored.type == type && shape_ok, "{}: expected {} [{}], got {} {}", split.at(name), h5::to_string(type),
                 fmt::join(expected_dims, ", "), stored.type_name, format_dims(stored.dims));
  return dataset;
}

int64_t length_of(const h5::Handle& dataset) { return h5::describe_dataset(dataset.get()).dims.at(0); }

template <typename T>
std::vector<T> read_vector(const h5::Handle& dataset, int64_t begin, int64_t end) {
  std::vector<T> values(static_cast<size_t>(end - begin));
  h5::read_rows(dataset.get(), h5::type_of<T>(), begin, end, 1, values.data());
  return values;
}

// ---- content checks: each names the dataset, the index in it, expected and actual ----

// Note [Examples have tokens]
// Every example holds at least one token: the writer refuses an empty one (DatasetWriter::append_text) and
// the reader rejects a file that has one, naming the split and the example, because a batch of only empty
// examples has no position 0 to classify from ("index 0 out of range" deep in training).

// offsets[k] belongs to example first + k: every value in [0, num_tokens], strictly increasing.
void check_offsets(const OpenSplit& split, const std::vector<int64_t>& offsets, int64_t first) {
  const int64_t num_tokens = split.info.num_tokens;
  for (size_t k = 0; k < offsets.size(); ++k) {
    const int64_t index = first + static_cast<int64_t>(k);
    HPCTRAIN_CHECK(offsets[k] >= 0 && offsets[k] <= num_tokens, "{}[{}] = {}: expected 0 <= offset <= {} (input_ids length)",
                   split.at(schema::kOffsets), index, offsets[k], num_tokens);
    HPCTRAIN_CHECK(k == 0 || offsets[k] >= offsets[k - 1], "{}[{}] = {} < offsets[{}] = {}: offsets must be non-decreasing",
                   split.at(schema::kOffsets), index, offsets[k], index - 1, offsets[k - 1]);
    HPCTRAIN_CHECK(k == 0 || offsets[k] > offsets[k - 1], "{}: example {} has no tokens (offsets[{}] = offsets[{}] = {}): "
                   "expected at least one token per example\n  hint: rewrite the file with `hpctrain prep`, which "
                   "never writes empty examples", split.where, index - 1, index - 1, index, offsets[k]);
  }
}

void check_labels(const OpenSplit& split, const std::vector<int64_t>& labels, int64_t first, int64_t num_labels) {
  for (size_t k = 0; k < labels.size(); ++k) {
    HPCTRAIN_CHECK(labels[k] >= 0 && labels[k] < num_labels, "{}[{}] = {}: expected 0 <= label < {} (label_names)",
                   split.at(schema::kLabels), first + static_cast<int64_t>(k), labels[k], num_labels);
  }
}

void check_source_index(const OpenSplit& split, const std::vector<int64_t>& source_index, int64_t first) {
  for (size_t k = 0; k < source_index.size(); ++k) {
    HPCTRAIN_CHECK(source_index[k] >= 0, "{}[{}] = {}: expected a row number >= 0", split.at(schema::kSourceIndex),
                   first + static_cast<int64_t>(k), source_index[k]);
  }
}

// Token ids and segment ids of examples [first, first + n), whose offsets are `absolute` (not rebased).
void check_tokens(const OpenSplit& split, const TextExamples& text, const std::vector<int64_t>& absolute, int64_t first,
                  int64_t vocab_size) {
  for (int64_t example = 0; example < text.size(); ++example) {
    for (int64_t t = text.offsets[example]; t < text.offsets[example + 1]; ++t) {
      const int32_t id = text.input_ids[t];
      HPCTRAIN_CHECK(id >= 0 && id < vocab_size,
                     "{}[{}] = {} (example {}): expected 0 <= token id < {} (tokenizer vocab_size)",
                     split.at(schema::kInputIds), absolute[example] + t - text.offsets[example], id, first + example,
                     vocab_size);
      HPCTRAIN_CHECK(!text.has_token_type_ids() || text.token_type_ids[t] < schema::kNumTokenTypes,
                     "{}[{}] = {} (example {}): expected 0 or 1", split.at(schema::kTokenTypeIds),
                     absolute[example] + t - text.offsets[example], text.token_type_ids[t], first + example);
      // Note [Document boundaries] (examples.cpp)
      const bool row_start = t == text.offsets[example];
      HPCTRAIN_CHECK(!text.has_document_starts() || text.document_start[t] == 1 ||
                         (text.document_start[t] == 0 && !row_start),
                     "{}[{}] = {} (example {}): expected {}", split.at(schema::kDocumentStart),
                     absolute[example] + t - text.offsets[example], text.document_start[t], first + example,
                     row_start ? "1 (the first token of a row begins a document)" : "0 or 1");
      HPCTRAIN_CHECK(!text.has_loss_mask() || text.loss_mask[t] <= 1, "{}[{}] = {} (example {}): expected 0 or 1",
                     split.at(schema::kLossMask), absolute[example] + t - text.offsets[example], text.loss_mask[t],
                     first + example);
    }
  }
}

void check_range(const OpenSplit& split, int64_t begin, int64_t end) {
  HPCTRAIN_CHECK(begin >= 0 && begin <= end && end <= split.info.num_examples,
                 "{}: examples [{}, {}) requested, expected a range inside [0, {})", split.where, begin, end,
                 split.info.num_examples);
}

// Sorted runs of nearby indices: each run is one hyperslab read [begin, end).
struct Run {
  int64_t begin = 0, end = 0;
};
std::vector<Run> group_runs(std::vector<int64_t> indices) {
  std::sort(indices.begin(), indices.end());
  std::vector<Run> runs;
  for (int64_t index : indices) {
    if (!runs.empty() && index <= runs.back().end + kMaxIndexGap) {
      runs.back().end = std::max(runs.back().end, index + 1);
    } else {
      runs.push_back({index, index + 1});
    }
  }
  return runs;
}

// Reads the runs covering `indices` with `read_range` and appends the examples to `out` in the order of
// `indices`.
template <typename Examples, typename ReadRange>
Examples read_by_runs(const OpenSplit& split, const std::vector<int64_t>& indices, Examples out, ReadRange read_range) {
  for (int64_t index : indices) check_range(split, index, index + 1);
  const std::vector<Run> runs = group_runs(indices);
  std::vector<Examples> pieces;
  for (const Run& run : runs) pieces.push_back(read_range(run.begin, run.end));
  for (int64_t index : indices) {
    // The run holding `index`: the last one starting at or before it.
    const auto run = std::upper_bound(runs.begin(), runs.end(), index,
                                      [](int64_t i, const Run& r) { return i < r.begin; }) - 1;
    out.append_from(pieces[static_cast<size_t>(run - runs.begin())], index - run->begin);
  }
  return out;
}

// Runs `work`; an Error that does not name `path` yet gets it in front (HDF5 call failures name only the
// call, and a damaged file can fail in any of them).
template <typename Work>
auto naming_file(const std::filesystem::path& path, Work&& work) {
  try {
    return work();
  } catch (const Error& error) {
    const std::string message = error.what();
    if (message.find(path.string()) != std::string::npos) throw;
    fail("{}: {}", path.string(), message);
  }
}

}  // namespace

struct DatasetReader::Impl {
  std::filesystem::path path;
  h5::Handle file;
  Task task = Task::text_classification;
  std::vector<std::string> label_names;
  nlohmann::json tokenizer = nlohmann::json::object();
  int64_t vocab_size = 0;
  std::string source, created_by;

  mutable std::mutex mutex;                          // guards open_splits
  mutable std::map<std::string, OpenSplit> open_splits;  // opened on first use; references stay valid

  void read_root_attributes();
  const OpenSplit& split(const std::string& name) const;
  OpenSplit open_split(const std::string& name) const;
  void open_text(OpenSplit& split) const;
  void open_images(OpenSplit& split) const;
  TextExamples read_text(const OpenSplit& split, int64_t begin, int64_t end) const;
  ImageExamples read_images(const OpenSplit& split, int64_t begin, int64_t end) const;
};

void DatasetReader::Impl::read_root_attributes() {
  const h5::Id root = file.get();
  const std::string where = path.string();
  HPCTRAIN_CHECK(h5::has_attribute(root, schema::kAttrFormat),
                 "{}: missing root attribute '{}': not an hpctrain dataset file (write one with `hpctrain prep`)",
                 where, schema::kAttrFormat);
  const int64_t version = h5::read_int64_attribute(root, schema::kAttrFormat);
  HPCTRAIN_CHECK(version == schema::kFormatVersion, "{}: {} = {} is not supported: expected {} (rewrite the file with this "
                 "version's `hpctrain prep`)", where, schema::kAttrFormat, version, schema::kFormatVersion);
  const std::string task_text = h5::read_string_attribute(root, schema::kAttrTask);
  try {
    task = parse_task(task_text);
  } catch (const Error& error) {
    fail("{}: attribute '{}': {}", where, schema::kAttrTask, error.what());
  }
  source = h5::read_string_attribute(root, schema::kAttrSource);
  created_by = h5::read_string_attribute(root, schema::kAttrCreatedBy);

  const std::string labels_text = h5::read_string_attribute(root, schema::kAttrLabelNames);
  const auto labels = nlohmann::json::parse(labels_text, nullptr, /*allow_exceptions=*/false);
  // A causal-lm file has no labels: its label_names is "[]".
  bool labels_ok = labels.is_array() && labels.empty() != has_labels(task);
  for (const auto& label : labels) labels_ok = labels_ok && label.is_string();
  HPCTRAIN_CHECK(labels_ok, "{}: attribute '{}': expected {}, got '{}'", where, schema::kAttrLabelNames,
                 has_labels(task) ? "a non-empty JSON array of strings" : "[] (a causal-lm file has no labels)",
                 labels_text);
  label_names = labels.get<std::vector<std::string>>();

  if (h5::has_attribute(root, schema::kAttrTokenizer)) {
    const std::string text = h5::read_string_attribute(root, schema::kAttrTokenizer);
    tokenizer = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    HPCTRAIN_CHECK(tokenizer.is_object(), "{}: attribute '{}': expected a JSON object, got '{}'", where,
                   schema::kAttrTokenizer, text);
  }
  if (is_text_task(task)) {
    const auto size = tokenizer.value("vocab_size", nlohmann::json());
    HPCTRAIN_CHECK(size.is_number_integer() && size.get<int64_t>() > 0,
                   "{}: attribute '{}' needs a positive integer vocab_size for a text task, got {}", where,
                   schema::kAttrTokenizer, tokenizer.dump());
    vocab_size = size.get<int64_t>();
  }
}

const OpenSplit& DatasetReader::Impl::split(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex);
  if (auto found = open_splits.find(name); found != open_splits.end()) return found->second;
  OpenSplit opened = naming_file(path, [&] { return open_split(name); });
  return open_splits.emplace(name, std::move(opened)).first->second;
}

OpenSplit DatasetReader::Impl::open_split(const std::string& name) const {
  if (!is_known_split(name) || !h5::has_link(file.get(), name)) {
    std::vector<std::string> available;
    for (auto known : schema::kSplitNames) {
      if (h5::has_link(file.get(), std::string(known))) available.emplace_back(known);
    }
    fail("{}: no split '{}'; available: {}", path.string(), name, fmt::join(available, ", "));
  }
  OpenSplit split;
  split.info.name = name;
  split.where = fmt::format("{}:/{}", path.string(), name);
  split.group = h5::open_group(file.get(), name);
  split.info.num_examples = h5::read_int64_attribute(split.group.get(), schema::kAttrNumExamples);
  HPCTRAIN_CHECK(split.info.num_examples >= 0, "{}: attribute {} = {}: expected >= 0", split.where,
                 schema::kAttrNumExamples, split.info.num_examples);
  const int64_t n = split.info.num_examples;
  if (has_labels(task)) split.labels = open_checked(split, schema::kLabels, h5::Type::i64, {n});
  split.source_index = open_checked(split, schema::kSourceIndex, h5::Type::i64, {n});
  if (is_text_task(task)) {
    open_text(split);
  } else {
    open_images(split);
  }
  return split;
}

void DatasetReader::Impl::open_text(OpenSplit& split) const {
  const int64_t n = split.info.num_examples;
  split.input_ids = open_checked(split, schema::kInputIds, h5::Type::i32, {-1});
  split.info.num_tokens = length_of(split.input_ids);
  split.offsets = open_checked(split, schema::kOffsets, h5::Type::i64, {n + 1});
  split.info.has_token_type_ids = h5::has_link(split.group.get(), schema::kTokenTypeIds);
  if (split.info.has_token_type_ids) {
    split.token_type_ids = open_checked(split, schema::kTokenTypeIds, h5::Type::u8, {split.info.num_tokens});
  }
  split.info.has_document_starts = h5::has_link(split.group.get(), schema::kDocumentStart);
  if (split.info.has_document_starts) {
    split.document_start = open_checked(split, schema::kDocumentStart, h5::Type::u8, {split.info.num_tokens});
  }
  split.info.has_loss_mask = h5::has_link(split.group.get(), schema::kLossMask);
  if (split.info.has_loss_mask) {
    HPCTRAIN_CHECK(task == Task::causal_lm, "{}: a {} file has a loss_mask; it belongs to causal-lm files only",
                   split.at(schema::kLossMask), to_string(task));
    split.loss_mask = open_checked(split, schema::kLossMask, h5::Type::u8, {split.info.num_tokens});
  }
  // The two ends of offsets pin every later hyperslab read inside input_ids.
  const auto first = read_vector<int64_t>(split.offsets, 0, 1);
  const auto last = read_vector<int64_t>(split.offsets, n, n + 1);
  HPCTRAIN_CHECK(first[0] == 0, "{}[0] = {}: expected 0", split.at(schema::kOffsets), first[0]);
  HPCTRAIN_CHECK(last[0] == split.info.num_tokens, "{}[{}] = {}: expected the length of input_ids, {}",
                 split.at(schema::kOffsets), n, last[0], split.info.num_tokens);
}

void DatasetReader::Impl::open_images(OpenSplit& split) const {
  split.pixels = open_checked(split, schema::kPixels, h5::Type::u8, {split.info.num_examples, -1, -1, -1});
  const auto dims = h5::describe_dataset(split.pixels.get()).dims;
  split.info.channels = dims[1];
  split.info.height = dims[2];
  split.info.width = dims[3];
  HPCTRAIN_CHECK(dims[1] > 0 && dims[2] > 0 && dims[3] > 0, "{}: expected image dims [N, C, H, W] > 0, got {}",
                 split.at(schema::kPixels), format_dims(dims));
  split.info.mean = h5::read_doubles_attribute(split.pixels.get(), schema::kAttrMean);
  split.info.std = h5::read_doubles_attribute(split.pixels.get(), schema::kAttrStd);
  for (const auto* stats : {&split.info.mean, &split.info.std}) {
    const char* name = stats == &split.info.mean ? schema::kAttrMean : schema::kAttrStd;
    HPCTRAIN_CHECK(static_cast<int64_t>(stats->size()) == split.info.channels,
                   "{}: attribute '{}' has {} values, expected one per channel ({})", split.at(schema::kPixels), name,
                   stats->size(), split.info.channels);
    for (double value : *stats) {
      HPCTRAIN_CHECK(std::isfinite(value) && value >= 0.0 && value <= 1.0,
                     "{}: attribute '{}' value {}: expected a statistic of pixel/255 in [0, 1]",
                     split.at(schema::kPixels), name, value);
    }
  }
}

TextExamples DatasetReader::Impl::read_text(const OpenSplit& split, int64_t begin, int64_t end) const {
  check_range(split, begin, end);
  TextExamples text;
  std::vector<int64_t> absolute = read_vector<int64_t>(split.offsets, begin, end + 1);
  check_offsets(split, absolute, begin);
  const int64_t first_token = absolute.front(), end_token = absolute.back();
  text.offsets.resize(absolute.size());
  for (size_t k = 0; k < absolute.size(); ++k) text.offsets[k] = absolute[k] - first_token;
  text.input_ids = read_vector<int32_t>(split.input_ids, first_token, end_token);
  if (split.info.has_token_type_ids) text.token_type_ids = read_vector<uint8_t>(split.token_type_ids, first_token, end_token);
  if (split.info.has_document_starts) text.document_start = read_vector<uint8_t>(split.document_start, first_token, end_token);
  if (split.info.has_loss_mask) text.loss_mask = read_vector<uint8_t>(split.loss_mask, first_token, end_token);
  text.source_index = read_vector<int64_t>(split.source_index, begin, end);
  check_tokens(split, text, absolute, begin, vocab_size);
  if (has_labels(task)) {
    text.labels = read_vector<int64_t>(split.labels, begin, end);
    check_labels(split, text.labels, begin, static_cast<int64_t>(label_names.size()));
  } else {
    text.labels.assign(static_cast<size_t>(end - begin), kNoLabel);
  }
  check_source_index(split, text.source_index, begin);
  return text;
}

ImageExamples DatasetReader::Impl::read_images(const OpenSplit& split, int64_t begin, int64_t end) const {
  check_range(split, begin, end);
  ImageExamples images;
  images.channels = split.info.channels;
  images.height = split.info.height;
  images.width = split.info.width;
  images.pixels.resize(static_cast<size_t>((end - begin) * images.image_bytes()));
  h5::read_rows(split.pixels.get(), h5::Type::u8, begin, end, images.image_bytes(), images.pixels.data());
  images.labels = read_vector<int64_t>(split.labels, begin, end);
  images.source_index = read_vector<int64_t>(split.source_index, begin, end);
  check_labels(split, images.labels, begin, static_cast<int64_t>(label_names.size()));
  check_source_index(split, images.source_index, begin);
  return images;
}

DatasetReader::DatasetReader(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->file = h5::open_file(path);
  naming_file(path, [&] { impl_->read_root_attributes(); });
}

DatasetReader::~DatasetReader() = default;
DatasetReader::DatasetReader(DatasetReader&&) noexcept = default;
DatasetReader& DatasetReader::operator=(DatasetReader&&) noexcept = default;

const std::filesystem::path& DatasetReader::path() const { return impl_->path; }
Task DatasetReader::task() const { return impl_->task; }
const std::vector<std::string>& DatasetReader::label_names() const { return impl_->label_names; }
int64_t DatasetReader::num_labels() const { return static_cast<int64_t>(impl_->label_names.size()); }
const nlohmann::json& DatasetReader::tokenizer() const { return impl_->tokenizer; }
int64_t DatasetReader::vocab_size() const { return impl_->vocab_size; }
const std::string& DatasetReader::source() const { return impl_->source; }
const std::string& DatasetReader::created_by() const { return impl_->created_by; }

std::vector<std::string> DatasetReader::splits() const {
  std::vector<std::string> names;
  for (auto known : schema::kSplitNames) {
    if (h5::has_link(impl_->file.get(), std::string(known))) names.emplace_back(known);
  }
  return names;
}

bool DatasetReader::has_split(const std::string& split) const {
  return is_known_split(split) && h5::has_link(impl_->file.get(), split);
}

SplitInfo DatasetReader::split_info(const std::string& split) const { return impl_->split(split).info; }

void DatasetReader::validate_split(const std::string& split) const {
  validate_examples(split, 0, impl_->split(split).info.num_examples);
}

void DatasetReader::validate_examples(const std::string& split_name, int64_t begin, int64_t end) const {
  const OpenSplit& split = impl_->split(split_name);
  check_range(split, begin, end);
  const bool text = is_text_task(impl_->task);
  const int64_t piece = text ? kValidateExamples
                            : std::max<int64_t>(1, kValidateImageBytes / (split.info.channels * split.info.height *
                                                                           split.info.width));
  // Pieces overlap in one offset, so monotonicity is checked across piece boundaries too.
  for (int64_t first = begin; first < end; first += piece) {
    const int64_t last = std::min(end, first + piece);
    if (text) {
      (void)impl_->read_text(split, first, last);
    } else {
      (void)impl_->read_images(split, first, last);
    }
  }
}

TextExamples DatasetReader::read_text(const std::string& split, int64_t begin, int64_t end) const {
  return impl_->read_text(impl_->split(split), begin, end);
}

TextExamples DatasetReader::read_text_indices(const std::string& split_name, const std::vector<int64_t>& indices) const {
  const OpenSplit& split = impl_->split(split_name);
  return read_by_runs(split, indices, TextExamples{}, [&](int64_t b, int64_t e) { return impl_->read_text(split, b, e); });
}

ImageExamples DatasetReader::read_images(const std::string& split, int64_t begin, int64_t end) const {
  return impl_->read_images(impl_->split(split), begin, end);
}

ImageExamples DatasetReader::read_image_indices(const std::string& split_name, const std::vector<int64_t>& indices) const {
  const OpenSplit& split = impl_->split(split_name);
  ImageExamples out;
  out.channels = split.info.channels;
  out.height = split.info.height;
  out.width = split.info.width;
  return read_by_runs(split, indices, std::move(out), [&](int64_t b, int64_t e) { return impl_->read_images(split, b, e); });
}

std::vector<int64_t> DatasetReader::read_labels(const std::string& split_name, int64_t begin, int64_t end) const {
  const OpenSplit& split = impl_->split(split_name);
  HPCTRAIN_CHECK(has_labels(impl_->task), "{}: a {} file has no labels", split.where, to_string(impl_->task));
  check_range(split, begin, end);
  std::vector<int64_t> labels = read_vector<int64_t>(split.labels, begin, end);
  check_labels(split, labels, begin, num_labels());
  return labels;
}

std::vector<int64_t> DatasetReader::read_source_index(const std::string& split_name, int64_t begin, int64_t end) const {
  const OpenSplit& split = impl_->split(split_name);
  check_range(split, begin, end);
  std::vector<int64_t> source_index = read_vector<int64_t>(split.source_index, begin, end);
  check_source_index(split, source_index, begin);
  return source_index;
}

std::vector<int64_t> DatasetReader::read_lengths(const std::string& split_name) const {
  const OpenSplit& split = impl_->split(split_name);
  HPCTRAIN_CHECK(is_text_task(impl_->task), "{}: read_lengths needs a text split", split.where);
  const int64_t n = split.info.num_examples;
  std::vector<int64_t> lengths;
  lengths.reserve(static_cast<size_t>(n));
  for (int64_t first = 0; first < n; first += kOffsetPiece) {
    const int64_t last = std::min(n, first + kOffsetPiece);
    const std::vector<int64_t> offsets = read_vector<int64_t>(split.offsets, first, last + 1);
    check_offsets(split, offsets, first);
    for (size_t k = 1; k < offsets.size(); ++k) lengths.push_back(offsets[k] - offsets[k - 1]);
  }
  return lengths;
}

int64_t DatasetReader::count_tokens(const std::string& split_name, int64_t begin, int64_t end) const {
  const OpenSplit& split = impl_->split(split_name);
  HPCTRAIN_CHECK(is_text_task(impl_->task), "{}: count_tokens needs a text split", split.where);
  check_range(split, begin, end);
  const auto first = read_vector<int64_t>(split.offsets, begin, begin + 1);
  const auto last = read_vector<int64_t>(split.offsets, end, end + 1);
  check_offsets(split, first, begin);
  check_offsets(split, last, end);
  HPCTRAIN_CHECK(last[0] >= first[0], "{}[{}] = {} < offsets[{}] = {}: offsets must be non-decreasing",
                 split.at(schema::kOffsets), end, last[0], begin, first[0]);
  return last[0] - first[0];
}

}  // namespace hpctrain::data
