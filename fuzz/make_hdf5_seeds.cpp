// Writes the seed corpus of fuzz_hdf5_dataset (fuzz/corpus/fuzz_hdf5_dataset/seed-*): small schema-1 files
// through the private HDF5 layer (uncompressed, 4-row chunks, so mutations reach attributes and data rather
// than deflate streams), two written by DatasetWriter (gzip, as `hpctrain prep` writes them), and hostile ones.
// Usage: make_hdf5_seeds OUTPUT_DIR   (scripts/fuzz.sh --seeds runs it)
#include "data/h5_handle.hpp"
#include "hpctrain/data/dataset_writer.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace fs = std::filesystem;
namespace h5 = hpctrain::data::h5;
namespace schema = hpctrain::data::schema;

namespace {

template <typename T>
void add_rows(h5::Id group, const char* name, const std::vector<T>& values, std::vector<int64_t> row_shape = {}) {
  int64_t row_elements = 1;
  for (int64_t dim : row_shape) row_elements *= dim;
  h5::Handle dataset = h5::create_rows_dataset(group, name, h5::type_of<T>(), h5::Layout{std::move(row_shape), 4});
  h5::append_rows(dataset.get(), h5::type_of<T>(), values.data(), static_cast<int64_t>(values.size()) / row_elements,
                  row_elements);
}

h5::Handle root(const fs::path& path, const char* task, const std::string& tokenizer) {
  h5::Handle file = h5::create_file(path);
  h5::write_int64_attribute(file.get(), schema::kAttrFormat, 1);
  h5::write_string_attribute(file.get(), schema::kAttrTask, task);
  h5::write_string_attribute(file.get(), schema::kAttrLabelNames, R"(["neg","pos"])");
  h5::write_string_attribute(file.get(), schema::kAttrSource, "seed.jsonl");
  h5::write_string_attribute(file.get(), schema::kAttrCreatedBy, "make_hdf5_seeds");
  h5::write_string_attribute(file.get(), schema::kAttrTokenizer, tokenizer);
  return file;
}

// Two text examples (one a pair when `pairs`); `offsets` lets a hostile seed break the CSR invariant.
void text_file(const fs::path& path, bool pairs, std::vector<int64_t> offsets = {0, 3, 5}) {
  h5::Handle file = root(path, "text-classification", R"({"type":"wordpiece","vocab_size":30})");
  h5::Handle group = h5::create_group(file.get(), "train");
  h5::write_int64_attribute(group.get(), schema::kAttrNumExamples, 2);
  add_rows<int32_t>(group.get(), schema::kInputIds, {1, 7, 2, 1, 2});
  add_rows<int64_t>(group.get(), schema::kOffsets, offsets);
  if (pairs) add_rows<uint8_t>(group.get(), schema::kTokenTypeIds, {0, 0, 0, 0, 1});
  add_rows<int64_t>(group.get(), schema::kLabels, {0, 1});
  add_rows<int64_t>(group.get(), schema::kSourceIndex, {0, 1});
  h5::close_file(file);
}

void image_file(const fs::path& path) {
  h5::Handle file = root(path, "image-classification", "{}");
  h5::Handle group = h5::create_group(file.get(), "validation");
  h5::write_int64_attribute(group.get(), schema::kAttrNumExamples, 2);
  {
    h5::Handle pixels = h5::create_rows_dataset(group.get(), schema::kPixels, h5::Type::u8, h5::Layout{{1, 2, 2}, 2});
    const std::vector<uint8_t> values{0, 64, 128, 255, 1, 2, 3, 4};
    h5::append_rows(pixels.get(), h5::Type::u8, values.data(), 2, 4);
    h5::write_doubles_attribute(pixels.get(), schema::kAttrMean, {0.25});
    h5::write_doubles_attribute(pixels.get(), schema::kAttrStd, {0.3});
  }
  add_rows<int64_t>(group.get(), schema::kLabels, {1, 0});
  add_rows<int64_t>(group.get(), schema::kSourceIndex, {0, 1});
  h5::close_file(file);
}

void writer_file(const fs::path& path) {
  hpctrain::data::FileAttributes attributes;
  attributes.label_names = {"a", "b", "c"};
  attributes.source = "seed.csv";
  attributes.created_by = "make_hdf5_seeds";
  attributes.tokenizer = {{"vocab_size", 200}};
  hpctrain::data::DatasetWriter writer(path, attributes, {}, /*overwrite=*/true);
  hpctrain::data::TextExamples examples;
  examples.append({101, 7, 102}, {}, 2, 0);
  examples.append({101, 8, 9, 102}, {}, 0, 1);
  writer.write_text_split("train", examples, false);
  writer.write_text_split("test", examples, false);
  writer.commit();
}

void truncated_copy(const fs::path& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(to, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() * 2 / 3));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path out = argv[1];
  fs::create_directories(out);
  text_file(out / "seed-text.h5", false);
  text_file(out / "seed-text-pairs.h5", true);
  text_file(out / "seed-hostile-offsets.h5", false, {0, 4, 3});
  image_file(out / "seed-images.h5");
  writer_file(out / "seed-writer-gzip.h5");
  truncated_copy(out / "seed-text.h5", out / "seed-hostile-truncated.h5");
  std::ofstream(out / "seed-hostile-not-hdf5.h5") << "\x89HDF\r\n\x1a\n but nothing else";
  return 0;
}
