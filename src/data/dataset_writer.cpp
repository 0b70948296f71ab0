#include "hpctrain/data/dataset_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <system_error>

#include "chunk_writer.hpp"
#include "h5_handle.hpp"
#include "hpctrain/core/error.hpp"

namespace hpctrain::data {
namespace fs = std::filesystem;

namespace {

// A text split's datasets, written by whole chunks (Note [Parallel chunk compression]).
struct TextColumns {
  h5::ChunkWriter input_ids, offsets, source_index;
  std::optional<h5::ChunkWriter> labels;          // not for causal-lm
  std::optional<h5::ChunkWriter> token_type_ids;  // sentence pairs only
  std::optional<h5::ChunkWriter> document_start;  // rows packed by documents only
  std::optional<h5::ChunkWriter> loss_mask;       // causal-lm files with a loss mask (Note [Loss mask])
  void finish() {
    for (h5::ChunkWriter* column : {&input_ids, &offsets, &source_index}) column->finish();
    for (auto* column : {&labels, &token_type_ids, &document_start, &loss_mask})
      if (*column) (*column)->finish();
  }
};

// The split being written: its datasets stay open between appends.
struct WriterSplit {
  std::string name;
  bool is_text = true;
  bool has_pairs = false;
  bool has_document_starts = false;
  bool has_loss_mask = false;
  h5::Handle group, labels, source_index, pixels;  // images
  std::optional<TextColumns> text;
  int64_t num_examples = 0, num_tokens = 0;
  int64_t channels = 0, height = 0, width = 0;
  // Exact per-channel sums of pixel values and their squares (uint8, so no rounding until the end).
  std::vector<uint64_t> pixel_sum, pixel_square_sum;
};

void check_attributes(const FileAttributes& attributes, const WriterOptions& options) {
  if (has_labels(attributes.task)) {
    HPCTRAIN_CHECK(!attributes.label_names.empty(), "dataset attributes: label_names is empty, expected at least one label");
  } else {
    HPCTRAIN_CHECK(attributes.label_names.empty(), "dataset attributes: task {} has no labels, got label_names {}",
                   to_string(attributes.task), nlohmann::json(attributes.label_names).dump());
  }
  std::set<std::string> unique(attributes.label_names.begin(), attributes.label_names.end());
  HPCTRAIN_CHECK(unique.size() == attributes.label_names.size(), "dataset attributes: label_names has duplicates");
  if (is_text_task(attributes.task)) {
    const auto& tokenizer = attributes.tokenizer;
    HPCTRAIN_CHECK(tokenizer.is_object() && tokenizer.contains("vocab_size") &&
                       tokenizer["vocab_size"].is_number_integer() && tokenizer["vocab_size"].get<int64_t>() > 0,
                   "dataset attributes: a text task needs tokenizer.vocab_size (a positive integer), got tokenizer {}",
                   tokenizer.dump());
  }
  HPCTRAIN_CHECK(options.compression == Compression::none || (options.gzip_level >= 1 && options.gzip_level <= 9),
                 "gzip level {} out of range: expected 1..9", options.gzip_level);
  HPCTRAIN_CHECK(options.threads >= 1, "writer threads must be at least 1, got {}", options.threads);
}

h5::Layout layout_for(const WriterOptions& options, int64_t chunk_rows, std::vector<int64_t> row_shape = {}) {
  return h5::Layout{std::move(row_shape), chunk_rows, options.compression, options.gzip_level};
}

template <typename T>
void append_vector(const h5::Handle& dataset, const std::vector<T>& values, size_t from = 0) {
  h5::append_rows(dataset.get(), h5::type_of<T>(), values.data() + from, static_cast<int64_t>(values.size() - from), 1);
}

}  // namespace

struct DatasetWriter::State {
  fs::path final_path, temporary_path;
  FileAttributes attributes;
  WriterOptions options;
  int64_t vocab_size = 0;
  h5::Handle file;
  std::set<std::string> written_splits;
  std::optional<WriterSplit> split;
  std::shared_ptr<h5::ChunkEncoder> encoder;  // text splits' chunks (Note [Parallel chunk compression])
  bool committed = false;

  void write_root_attributes();
  void begin_split(const std::string& name, bool is_text);
  void check_labels(const std::vector<int64_t>& labels, const std::vector<int64_t>& source_index) const;
  void check_tokens(const TextExamples& piece) const;
};

void DatasetWriter::State::write_root_attributes() {
  const h5::Id root = file.get();
  h5::write_int64_attribute(root, schema::kAttrFormat, schema::kFormatVersion);
  h5::write_string_attribute(root, schema::kAttrTask, std::string(to_string(attributes.task)));
  h5::write_string_attribute(root, schema::kAttrLabelNames, nlohmann::json(attributes.label_names).dump());
  h5::write_string_attribute(root, schema::kAttrSource, attributes.source);
  h5::write_string_attribute(root, schema::kAttrCreatedBy, attributes.created_by);
  const bool no_tokenizer = attributes.tokenizer.is_null() || attributes.tokenizer.empty();
  h5::write_string_attribute(root, schema::kAttrTokenizer, no_tokenizer ? "{}" : attributes.tokenizer.dump());
}

void DatasetWriter::State::begin_split(const std::string& name, bool is_text) {
  HPCTRAIN_CHECK(!committed, "{}: the writer was already committed", final_path.string());
  HPCTRAIN_CHECK(is_known_split(name), "unknown split '{}': expected train, validation or test", name);
  HPCTRAIN_CHECK(!split, "{}: split '{}' begun while split '{}' is still open (call end_split first)",
                 final_path.string(), name, split ? split->name : "");
  HPCTRAIN_CHECK(!written_splits.count(name), "{}: split '{}' written twice", final_path.string(), name);
  const bool task_is_text = is_text_task(attributes.task);
  HPCTRAIN_CHECK(is_text == task_is_text, "{}: split '{}': cannot write {} to a {} file", final_path.string(), name,
                 is_text ? "text" : "images", to_string(attributes.task));
  split.emplace();
  split->name = name;
  split->is_text = is_text;
  split->group = h5::create_group(file.get(), name);
}

// Labels are checked when the task has them (a causal-lm file has none: they are ignored); rows always.
void DatasetWriter::State::check_labels(const std::vector<int64_t>& labels,
                                        const std::vector<int64_t>& source_index) const {
  const auto num_labels = static_cast<int64_t>(attributes.label_names.size());
  const bool labelled = has_labels(attributes.task);
  for (size_t i = 0; i < labels.size(); ++i) {
    HPCTRAIN_CHECK(!labelled || (labels[i] >= 0 && labels[i] < num_labels),
                   "split '{}', example {}: label {} out of range: expected 0 <= label < {} (label_names)",
                   split->name, split->num_examples + static_cast<int64_t>(i), labels[i], num_labels);
    HPCTRAIN_CHECK(source_index[i] >= 0, "split '{}', example {}: source_index {} is negative", split->name,
                   split->num_examples + static_cast<int64_t>(i), source_index[i]);
  }
}

void DatasetWriter::State::check_tokens(const TextExamples& piece) const {
  for (int64_t example = 0; example < piece.size(); ++example) {
    // Note [Examples have tokens] (dataset_reader.cpp).
    HPCTRAIN_CHECK(piece.length(example) > 0, "split '{}', example {} (source row {}): no tokens; every example needs "
                   "at least one", split->name, split->num_examples + example, piece.source_index[static_cast<size_t>(example)]);
    for (int64_t t = piece.offsets[example]; t < piece.offsets[example + 1]; ++t) {
      const int32_t id = piece.input_ids[t];
      HPCTRAIN_CHECK(id >= 0 && id < vocab_size,
                     "split '{}', example {}: token id {} out of range: expected 0 <= id < vocab_size {}", split->name,
                     split->num_examples + example, id, vocab_size);
      HPCTRAIN_CHECK(!split->has_pairs || piece.token_type_ids[t] < schema::kNumTokenTypes,
                     "split '{}', example {}: token_type_id {} out of range: expected 0 or 1", split->name,
                     split->num_examples + example, piece.token_type_ids[t]);
      HPCTRAIN_CHECK(!split->has_loss_mask || piece.loss_mask[t] <= 1,
                     "split '{}', example {}: loss_mask value {} out of range: expected 0 or 1", split->name,
                     split->num_examples + example, piece.loss_mask[t]);
    }
  }
}

DatasetWriter::DatasetWriter(const fs::path& final_path, const FileAttributes& attributes,
                             const WriterOptions& options, bool overwrite)
    : state_(std::make_unique<State>()) {
  HPCTRAIN_CHECK(overwrite || !fs::exists(final_path), "{} already exists; pass --overwrite to replace it",
                 final_path.string());
  check_attributes(attributes, options);
  state_->final_path = final_path;
  // prep names it too, to remove it before an abort (remove_own_temporaries in src/prep/text_prep.cpp)
  state_->temporary_path = fs::path(final_path.string() + ".tmp." + std::to_string(::getpid()));
  state_->attributes = attributes;
  state_->options = options;
  if (is_text_task(attributes.task)) state_->vocab_size = attributes.tokenizer["vocab_size"].get<int64_t>();
  std::error_code error;
  if (final_path.has_parent_path()) fs::create_directories(final_path.parent_path(), error);
  state_->file = h5::create_file(state_->temporary_path);
  state_->write_root_attributes();
}

DatasetWriter::~DatasetWriter() {
  if (state_->committed) return;
  state_->split.reset();
  state_->file.reset();
  std::error_code ignored;
  fs::remove(state_->temporary_path, ignored);
}

const fs::path& DatasetWriter::temporary_path() const { return state_->temporary_path; }

void DatasetWriter::write_text_split(const std::string& split, const TextExamples& examples, bool has_pairs,
                                     bool has_document_starts) {
  begin_text_split(split, has_pairs, has_document_starts, examples.has_loss_mask());
  append_text(examples);
  end_split();
}

void DatasetWriter::write_image_split(const std::string& split, const ImageExamples& examples) {
  begin_image_split(split, examples.channels, examples.height, examples.width);
  append_images(examples);
  end_split();
}

void DatasetWriter::begin_text_split(const std::string& split_name, bool has_pairs, bool has_document_starts,
                                     bool has_loss_mask) {
  HPCTRAIN_CHECK(!has_loss_mask || state_->attributes.task == Task::causal_lm,
                 "split '{}': a loss_mask is for causal-lm files, not {}", split_name, to_string(state_->attributes.task));
  state_->begin_split(split_name, /*is_text=*/true);
  WriterSplit& split = *state_->split;
  split.has_pairs = has_pairs;
  split.has_document_starts = has_document_starts;
  split.has_loss_mask = has_loss_mask;
  const h5::Id group = split.group.get();
  const WriterOptions& options = state_->options;
  auto column = [&](const char* name, h5::Type type, int64_t chunk) {
    const h5::Layout layout = layout_for(options, chunk);
    if (!state_->encoder) state_->encoder = std::make_shared<h5::ChunkEncoder>(options.threads, options.queue_bytes);
    return h5::ChunkWriter(h5::create_rows_dataset(group, name, type, layout), type, layout, state_->encoder);
  };
  // Created in this order (labels between offsets and source_index), as before causal-lm: the same bytes.
  auto input_ids = column(schema::kInputIds, h5::Type::i32, schema::kTokenChunk);
  auto offsets = column(schema::kOffsets, h5::Type::i64, schema::kExampleChunk);
  std::optional<h5::ChunkWriter> labels;
  if (has_labels(state_->attributes.task)) labels.emplace(column(schema::kLabels, h5::Type::i64, schema::kExampleChunk));
  auto source_index = column(schema::kSourceIndex, h5::Type::i64, schema::kExampleChunk);
  split.text.emplace(TextColumns{std::move(input_ids), std::move(offsets), std::move(source_index), std::move(labels),
                                 std::nullopt, std::nullopt, std::nullopt});
  if (has_pairs) split.text->token_type_ids.emplace(column(schema::kTokenTypeIds, h5::Type::u8, schema::kTokenChunk));
  if (has_document_starts)
    split.text->document_start.emplace(column(schema::kDocumentStart, h5::Type::u8, schema::kTokenChunk));
  if (has_loss_mask) split.text->loss_mask.emplace(column(schema::kLossMask, h5::Type::u8, schema::kTokenChunk));
  const int64_t zero = 0;
  split.text->offsets.append(&zero, 1);
}

void DatasetWriter::append_text(const TextExamples& piece) {
  HPCTRAIN_CHECK(state_->split && state_->split->is_text, "append_text without begin_text_split");
  WriterSplit& split = *state_->split;
  const std::string what = fmt::format("split '{}', examples from {}", split.name, split.num_examples);
  piece.check_consistent(what.c_str());
  HPCTRAIN_CHECK(split.has_pairs == piece.has_token_type_ids() || piece.num_tokens() == 0,
                 "{}: the split was begun {} sentence pairs but this piece {} token_type_ids", what,
                 split.has_pairs ? "with" : "without", piece.has_token_type_ids() ? "has" : "has no");
  HPCTRAIN_CHECK(split.has_document_starts == piece.has_document_starts() || piece.num_tokens() == 0,
                 "{}: the split was begun {} document boundaries but this piece {} document_start", what,
                 split.has_document_starts ? "with" : "without", piece.has_document_starts() ? "has" : "has no");
  HPCTRAIN_CHECK(split.has_loss_mask == piece.has_loss_mask() || piece.num_tokens() == 0,
                 "{}: the split was begun {} a loss mask but this piece {} loss_mask", what,
                 split.has_loss_mask ? "with" : "without", piece.has_loss_mask() ? "has" : "has no");
  state_->check_labels(piece.labels, piece.source_index);
  state_->check_tokens(piece);

  std::vector<int64_t> offsets(piece.offsets.begin() + 1, piece.offsets.end());
  for (int64_t& offset : offsets) offset += split.num_tokens;
  TextColumns& text = *split.text;
  text.input_ids.append(piece.input_ids.data(), piece.num_tokens());
  if (split.has_pairs) text.token_type_ids->append(piece.token_type_ids.data(), piece.num_tokens());
  if (split.has_document_starts) text.document_start->append(piece.document_start.data(), piece.num_tokens());
  if (split.has_loss_mask) text.loss_mask->append(piece.loss_mask.data(), piece.num_tokens());
  text.offsets.append(offsets.data(), piece.size());
  if (text.labels) text.labels->append(piece.labels.data(), piece.size());
  text.source_index.append(piece.source_index.data(), piece.size());
  split.num_examples += piece.size();
  split.num_tokens += piece.num_tokens();
}

void DatasetWriter::begin_image_split(const std::string& split_name, int64_t channels, int64_t height, int64_t width) {
  HPCTRAIN_CHECK(channels > 0 && height > 0 && width > 0, "split '{}': image shape [{}, {}, {}] must be positive",
                 split_name, channels, height, width);
  state_->begin_split(split_name, /*is_text=*/false);
  WriterSplit& split = *state_->split;
  split.channels = channels;
  split.height = height;
  split.width = width;
  split.pixel_sum.assign(channels, 0);
  split.pixel_square_sum.assign(channels, 0);
  const h5::Id group = split.group.get();
  const WriterOptions& options = state_->options;
  const int64_t images_per_chunk = std::max<int64_t>(1, schema::kImageChunkBytes / (channels * height * width));
  split.pixels = h5::create_rows_dataset(group, schema::kPixels, h5::Type::u8,
                                         layout_for(options, images_per_chunk, {channels, height, width}));
  split.labels = h5::create_rows_dataset(group, schema::kLabels, h5::Type::i64, layout_for(options, schema::kExampleChunk));
  split.source_index =
      h5::create_rows_dataset(group, schema::kSourceIndex, h5::Type::i64, layout_for(options, schema::kExampleChunk));
}

void DatasetWriter::append_images(const ImageExamples& piece) {
  HPCTRAIN_CHECK(state_->split && !state_->split->is_text, "append_images without begin_image_split");
  WriterSplit& split = *state_->split;
  const std::string what = fmt::format("split '{}', images from {}", split.name, split.num_examples);
  piece.check_consistent(what.c_str());
  HPCTRAIN_CHECK(piece.channels == split.channels && piece.height == split.height && piece.width == split.width,
                 "{}: image shape [{}, {}, {}], expected [{}, {}, {}] as begun", what, piece.channels, piece.height,
                 piece.width, split.channels, split.height, split.width);
  state_->check_labels(piece.labels, piece.source_index);

  const int64_t plane = split.height * split.width;
  for (int64_t image = 0; image < piece.size(); ++image) {
    for (int64_t c = 0; c < split.channels; ++c) {
      const uint8_t* pixel = piece.image(image) + c * plane;
      uint64_t sum = 0, square_sum = 0;
      for (int64_t p = 0; p < plane; ++p) {
        sum += pixel[p];
        square_sum += static_cast<uint64_t>(pixel[p]) * pixel[p];
      }
      split.pixel_sum[c] += sum;
      split.pixel_square_sum[c] += square_sum;
    }
  }
  h5::append_rows(split.pixels.get(), h5::Type::u8, piece.pixels.data(), piece.size(), piece.image_bytes());
  append_vector(split.labels, piece.labels);
  append_vector(split.source_index, piece.source_index);
  split.num_examples += piece.size();
}

void DatasetWriter::end_split() {
  HPCTRAIN_CHECK(state_->split, "end_split without an open split");
  WriterSplit& split = *state_->split;
  HPCTRAIN_CHECK(split.num_examples > 0, "{}: split '{}' has no examples; leave it out instead",
                 state_->final_path.string(), split.name);
  if (split.text) split.text->finish();
  h5::write_int64_attribute(split.group.get(), schema::kAttrNumExamples, split.num_examples);
  if (!split.is_text) {
    // Population statistics (ddof = 0) of pixel/255, as torchvision-style Normalize expects.
    const double count = static_cast<double>(split.num_examples * split.height * split.width);
    std::vector<double> mean(split.channels), stddev(split.channels);
    for (int64_t c = 0; c < split.channels; ++c) {
      mean[c] = static_cast<double>(split.pixel_sum[c]) / (255.0 * count);
      const double mean_square = static_cast<double>(split.pixel_square_sum[c]) / (255.0 * 255.0 * count);
      stddev[c] = std::sqrt(std::max(0.0, mean_square - mean[c] * mean[c]));
    }
    h5::write_doubles_attribute(split.pixels.get(), schema::kAttrMean, mean);
    h5::write_doubles_attribute(split.pixels.get(), schema::kAttrStd, stddev);
  }
  state_->written_splits.insert(split.name);
  state_->split.reset();
}

void DatasetWriter::commit() {
  HPCTRAIN_CHECK(!state_->committed, "{}: commit() called twice", state_->final_path.string());
  if (state_->split) end_split();
  HPCTRAIN_CHECK(!state_->written_splits.empty(), "{}: no split was written", state_->final_path.string());
  h5::close_file(state_->file);
  std::error_code error;
  fs::rename(state_->temporary_path, state_->final_path, error);
  HPCTRAIN_CHECK(!error, "cannot rename {} to {}: {}", state_->temporary_path.string(), state_->final_path.string(),
                 error.message());
  state_->committed = true;
}

}  // namespace hpctrain::data
