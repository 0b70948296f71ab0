// `hpctrain prep images`: MNIST-style IDX files → one HDF5 file (schema v1) with train and validation splits.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "hpctrain/data/dataset_writer.hpp"

namespace hpctrain::prep {

struct ImagePrepOptions {
  // Either a folder with the standard MNIST names (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
  // t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz]) or the four files explicitly.
  std::filesystem::path input_dir;
  std::filesystem::path train_images, train_labels, validation_images, validation_labels;
  std::filesystem::path output;
  std::vector<std::string> labels;  // names; a single entry "fashion-mnist" or "mnist" selects a preset; empty: "0".."K-1"
  uint64_t seed = 42;  // the one shuffle applied when writing
  bool overwrite = false;
  data::Compression compression = data::WriterOptions{}.compression;
  std::string created_by;
};

struct ImageSplitSummary {
  std::string name;
  int64_t examples = 0;
  std::vector<int64_t> label_counts;
};

struct ImagePrepReport {
  std::vector<std::string> label_names;
  int64_t channels = 0, height = 0, width = 0;
  std::vector<ImageSplitSummary> splits;
};

// Label names of a preset ("fashion-mnist", "mnist"); empty when the name is no preset.
std::vector<std::string> image_label_preset(const std::string& name);

ImagePrepReport prep_images(const ImagePrepOptions& options);

}  // namespace hpctrain::prep
