// Inputs checked before use: examples without tokens (Note [Examples have tokens]) and errors that name the file.
#include <boost/test/unit_test.hpp>

#include <fstream>

#include "dataset_fixtures.hpp"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Example 5 of the train split becomes empty: offsets[6] = offsets[5] (the next example takes its tokens).
fs::path file_with_empty_example(const TempDir& dir) {
  const fs::path path = dir.path() / "empty.h5";
  const data::TextExamples text = make_text(20, 7, false);
  write_text_file(path, text, false, data::Compression::none);
  overwrite_element<int64_t>(path, "train", "offsets", 6, text.offsets[5]);
  return path;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hostile_inputs)

BOOST_AUTO_TEST_CASE(writer_refuses_an_example_without_tokens) {
  TempDir dir;
  data::TextExamples text = make_text(3, 1, false);
  text.append({}, {}, 0, 77);
  const std::string error = error_of([&] { write_text_file(dir.path() / "x.h5", text, false); });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, "split 'train', example 3 (source row 77): no tokens"));
}

BOOST_AUTO_TEST_CASE(reader_rejects_an_example_without_tokens_naming_file_split_and_example) {
  TempDir dir;
  const fs::path path = file_with_empty_example(dir);
  const data::DatasetReader reader(path);
  const std::string where = path.string() + ":/train: example 5 has no tokens";
  for (const std::string& error :
       {error_of([&] { reader.validate_split("train"); }), error_of([&] { (void)reader.read_text("train", 5, 6); }),
        error_of([&] { (void)reader.read_text_indices("train", {5}); }),
        error_of([&] { (void)reader.read_lengths("train"); })}) {
    BOOST_TEST_INFO(error);
    BOOST_CHECK(contains(error, where));
  }
  BOOST_CHECK_NO_THROW((void)reader.read_text("train", 0, 5));  // the examples before it are fine
}

BOOST_AUTO_TEST_CASE(truncated_file_names_the_file) {
  TempDir dir;
  const fs::path path = dir.path() / "full.h5";
  write_text_file(path, make_text(2000, 3, false), false, data::Compression::none);
  const fs::path truncated = dir.path() / "truncated.h5";
  {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  const std::string error = error_of([&] {
    const data::DatasetReader reader(truncated);
    reader.validate_split("train");
  });
  BOOST_TEST_INFO(error);
  BOOST_CHECK(contains(error, truncated.string()));
}

BOOST_AUTO_TEST_CASE(unknown_split_names_the_file_and_lists_the_splits) {
  TempDir dir;
  const fs::path path = write_text_file(dir.path() / "x.h5", make_text(5, 1, false), false);
  const std::string error = error_of([&] { (void)data::DatasetReader(path).split_info("test"); });
  BOOST_CHECK(contains(error, path.string() + ": no split 'test'; available: train"));
}

BOOST_AUTO_TEST_SUITE_END()
