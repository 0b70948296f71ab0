#include "hpctrain/prep/image_prep.hpp"

#include <algorithm>
#include <fmt/ranges.h>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/random.hpp"
#include "hpctrain/data/idx.hpp"

namespace hpctrain::prep {
namespace {

namespace fs = std::filesystem;

// The standard file name in `dir`, gzip-compressed or plain.
fs::path find_standard_file(const fs::path& dir, const std::string& stem) {
  for (const std::string& candidate : {stem + ".gz", stem}) {
    if (fs::is_regular_file(dir / candidate)) return dir / candidate;
  }
  fail("{}: no {} or {}.gz\n  hint: pass the files explicitly with --train-images/--train-labels/--validation-images/--validation-labels",
       dir.string(), stem, stem);
}

struct SplitFiles {
  std::string name;
  fs::path images, labels;
};

std::vector<SplitFiles> split_files(const ImagePrepOptions& options) {
  if (!options.input_dir.empty()) {
    HPCTRAIN_CHECK(fs::is_directory(options.input_dir), "--input-dir '{}' is not a folder", options.input_dir.string());
    return {{"train", find_standard_file(options.input_dir, "train-images-idx3-ubyte"),
             find_standard_file(options.input_dir, "train-labels-idx1-ubyte")},
            {"validation", find_standard_file(options.input_dir, "t10k-images-idx3-ubyte"),
             find_standard_file(options.input_dir, "t10k-labels-idx1-ubyte")}};
  }
  HPCTRAIN_CHECK(!options.train_images.empty() && !options.train_labels.empty(),
                 "give --input-dir, or --train-images and --train-labels (and optionally --validation-images/--validation-labels)");
  std::vector<SplitFiles> files = {{"train", options.train_images, options.train_labels}};
  HPCTRAIN_CHECK(options.validation_images.empty() == options.validation_labels.empty(),
                 "--validation-images and --validation-labels go together");
  if (!options.validation_images.empty()) files.push_back({"validation", options.validation_images, options.validation_labels});
  return files;
}

data::ImageExamples read_split(const SplitFiles& files) {
  data::IdxArray images = data::read_idx_u8(files.images);
  data::IdxArray labels = data::read_idx_u8(files.labels);
  HPCTRAIN_CHECK(images.dims.size() == 3 || images.dims.size() == 4,
                 "{}: expected images of shape [N, H, W] or [N, C, H, W], got {} dimensions", files.images.string(), images.dims.size());
  HPCTRAIN_CHECK(labels.dims.size() == 1, "{}: expected labels of shape [N], got {} dimensions", files.labels.string(), labels.dims.size());
  HPCTRAIN_CHECK(labels.dims[0] == images.dims[0], "{} has {} labels but {} has {} images", files.labels.string(), labels.dims[0],
                 files.images.string(), images.dims[0]);
  data::ImageExamples examples;
  const bool has_channels = images.dims.size() == 4;
  examples.channels = has_channels ? images.dims[1] : 1;
  examples.height = images.dims[has_channels ? 2 : 1];
  examples.width = images.dims[has_channels ? 3 : 2];
  examples.pixels = std::move(images.data);
  examples.labels.assign(labels.data.begin(), labels.data.end());
  examples.source_index.resize(examples.labels.size());
  for (std::size_t i = 0; i < examples.source_index.size(); ++i) examples.source_index[i] = static_cast<int64_t>(i);
  return examples;
}

// Shuffles the examples once (seeded), as text prep does, so contiguous shards are i.i.d.
void shuffle_examples(data::ImageExamples& examples, uint64_t seed) {
  std::vector<int64_t> order(examples.labels.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  shuffle(order, seed);
  const std::size_t image_bytes = static_cast<std::size_t>(examples.channels * examples.height * examples.width);
  data::ImageExamples out = examples;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const auto from = static_cast<std::size_t>(order[i]);
    std::copy_n(examples.pixels.begin() + static_cast<std::ptrdiff_t>(from * image_bytes), image_bytes,
                out.pixels.begin() + static_cast<std::ptrdiff_t>(i * image_bytes));
    out.labels[i] = examples.labels[from];
    out.source_index[i] = examples.source_index[from];
  }
  examples = std::move(out);
}

std::vector<std::string> resolve_label_names(const std::vector<std::string>& requested, int64_t max_label) {
  std::vector<std::string> names = requested;
  if (requested.size() == 1) {
    auto preset = image_label_preset(requested[0]);
    if (!preset.empty()) names = std::move(preset);
  }
  if (names.empty()) {
    for (int64_t i = 0; i <= max_label; ++i) names.push_back(std::to_string(i));
  }
  HPCTRAIN_CHECK(max_label < static_cast<int64_t>(names.size()), "the label files hold label {} but only {} label names were given ({})",
                 max_label, names.size(), fmt::join(names, ","));
  return names;
}

}  // namespace

std::vector<std::string> image_label_preset(const std::string& name) {
  if (name == "fashion-mnist")
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
  if (name == "mnist") return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  return {};
}

ImagePrepReport prep_images(const ImagePrepOptions& options) {
  HPCTRAIN_CHECK(!options.output.empty(), "--output is required");
  const auto files = split_files(options);
  std::vector<data::ImageExamples> splits;
  int64_t max_label = 0;
  for (const auto& file : files) {
    splits.push_back(read_split(file));
    shuffle_examples(splits.back(), derive_seed(options.seed, 2, splits.size() - 1));
    for (int64_t label : splits.back().labels) max_label = std::max(max_label, label);
  }
  for (const auto& split : splits) {
    HPCTRAIN_CHECK(split.channels == splits[0].channels && split.height == splits[0].height && split.width == splits[0].width,
                   "image sizes differ between splits: {}x{}x{} and {}x{}x{}", splits[0].channels, splits[0].height,
                   splits[0].width, split.channels, split.height, split.width);
  }
  ImagePrepReport report;
  report.label_names = resolve_label_names(options.labels, max_label);
  report.channels = splits[0].channels;
  report.height = splits[0].height;
  report.width = splits[0].width;

  data::FileAttributes attributes;
  attributes.task = data::Task::image_classification;
  attributes.label_names = report.label_names;
  attributes.source = files[0].images.parent_path().string();
  attributes.created_by = options.created_by;
  attributes.tokenizer = nlohmann::json::object();
  data::WriterOptions writer_options;
  writer_options.compression = options.compression;
  data::DatasetWriter writer(options.output, attributes, writer_options, options.overwrite);
  for (std::size_t s = 0; s < files.size(); ++s) {
    writer.write_image_split(files[s].name, splits[s]);
    ImageSplitSummary summary{files[s].name, static_cast<int64_t>(splits[s].labels.size()),
                              std::vector<int64_t>(report.label_names.size(), 0)};
    for (int64_t label : splits[s].labels) ++summary.label_counts[static_cast<std::size_t>(label)];
    report.splits.push_back(std::move(summary));
  }
  writer.commit();
  return report;
}

}  // namespace hpctrain::prep
