// HDF5 dataset file: writer/reader round trips, writer rules, and the reader's errors on corrupt files.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>

#include "data/chunk_writer.hpp"
#include "dataset_fixtures.hpp"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check_same_examples(const data::TextExamples& got, const data::TextExamples& expected, int64_t first) {
  for (int64_t i = 0; i < got.size(); ++i) {
    const int64_t e = first + i;
    BOOST_REQUIRE_EQUAL(got.length(i), expected.length(e));
    BOOST_CHECK_EQUAL(got.labels[i], expected.labels[e]);
    BOOST_CHECK_EQUAL(got.source_index[i], expected.source_index[e]);
    for (int64_t t = 0; t < got.length(i); ++t) {
      BOOST_CHECK_EQUAL(got.input_ids[got.offsets[i] + t], expected.input_ids[expected.offsets[e] + t]);
      if (expected.has_token_type_ids()) {
        BOOST_CHECK_EQUAL(got.token_type_ids[got.offsets[i] + t], expected.token_type_ids[expected.offsets[e] + t]);
      }
    }
  }
}

// Appends `all` to the open text split in pieces of `piece` examples (the last one shorter).
void append_in_pieces(data::DatasetWriter& writer, const data::TextExamples& all, int64_t piece) {
  for (int64_t first = 0; first < all.size(); first += piece) {
    std::vector<int64_t> rows;
    for (int64_t i = first; i < std::min(all.size(), first + piece); ++i) rows.push_back(i);
    writer.append_text(data::gather(all, rows));
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dataset_file)

BOOST_AUTO_TEST_CASE(text_round_trip_in_pieces) {
  TempDir dir;
  for (bool pairs : {false, true}) {
    for (auto compression : {data::Compression::none, data::Compression::gzip}) {
      const auto path = dir.file(fmt::format("text-{}-{}.h5", pairs, to_string(compression)));
      const data::TextExamples all = make_text(500, 7, pairs);
      {
        data::DatasetWriter writer(path, text_attributes(), {compression, 4}, false);
        writer.begin_text_split("train", pairs);
        append_in_pieces(writer, all, 123);
        writer.end_split();
        writer.commit();
      }
      const data::DatasetReader reader(path);
      BOOST_CHECK(reader.task() == data::Task::text_classification);
      BOOST_CHECK_EQUAL(reader.label_names().size(), 3u);
      BOOST_CHECK_EQUAL(reader.vocab_size(), 1000);
      BOOST_CHECK_EQUAL(reader.tokenizer()["vocab_sha256"], "0123abcd");
      BOOST_CHECK_EQUAL(reader.source(), "synthetic.jsonl");
      BOOST_CHECK_EQUAL(reader.created_by(), "hpctrain tests");
      BOOST_CHECK(reader.splits() == std::vector<std::string>{"train"});
      const data::SplitInfo info = reader.split_info("train");
      BOOST_CHECK_EQUAL(info.num_examples, 500);
      BOOST_CHECK_EQUAL(info.num_tokens, all.num_tokens());
      BOOST_CHECK_EQUAL(info.has_token_type_ids, pairs);
      reader.validate_split("train");

      const data::TextExamples whole = reader.read_text("train", 0, 500);
      BOOST_CHECK(whole.offsets == all.offsets);
      BOOST_CHECK(whole.input_ids == all.input_ids);
      BOOST_CHECK(whole.token_type_ids == all.token_type_ids);
      BOOST_CHECK(whole.labels == all.labels);
      BOOST_CHECK(whole.source_index == all.source_index);

      const data::TextExamples middle = reader.read_text("train", 120, 130);
      BOOST_CHECK_EQUAL(middle.offsets.front(), 0);
      check_same_examples(middle, all, 120);

      const std::vector<int64_t> indices = {499, 3, 4, 3, 250, 0, 251};
      const data::TextExamples picked = reader.read_text_indices("train", indices);
      BOOST_REQUIRE_EQUAL(picked.size(), 7);
      BOOST_CHECK(data::gather(all, indices).input_ids == picked.input_ids);
      BOOST_CHECK(data::gather(all, indices).labels == picked.labels);

      std::vector<int64_t> lengths = reader.read_lengths("train");
      BOOST_REQUIRE_EQUAL(lengths.size(), 500u);
      for (int64_t i = 0; i < 500; ++i) BOOST_CHECK_EQUAL(lengths[i], all.length(i));
      BOOST_CHECK_EQUAL(reader.count_tokens("train", 10, 20), all.offsets[20] - all.offsets[10]);
      const auto labels = reader.read_labels("train", 5, 9);
      BOOST_CHECK(labels == std::vector<int64_t>(all.labels.begin() + 5, all.labels.begin() + 9));
    }
  }
}

// Note [Parallel chunk compression]: chunks encoded on worker threads and written with H5Dwrite_chunk are
// stored byte for byte as HDF5's own filter pipeline stores them, partial last chunk included.
BOOST_AUTO_TEST_CASE(chunk_writer_stores_what_the_filter_pipeline_stores) {
  namespace h5 = data::h5;
  TempDir dir;
  SplitMix64 rng(5);
  std::vector<int32_t> values(3 * 1000 + 617);
  for (auto& value : values) value = static_cast<int32_t>(rng.below(30522));
  for (auto compression : {data::Compression::gzip, data::Compression::none}) {
    for (int threads : {1, 3}) {
      const h5::Layout layout{{}, 1000, compression, 4};
      h5::Handle file = h5::create_file(dir.file(fmt::format("chunks-{}-{}.h5", to_string(compression), threads)));
      h5::Handle pipeline = h5::create_rows_dataset(file.get(), "pipeline", h5::Type::i32, layout);
      auto encoder = std::make_shared<h5::ChunkEncoder>(threads, 8000);  // a short queue: the writer waits often
      h5::ChunkWriter direct(h5::create_rows_dataset(file.get(), "direct", h5::Type::i32, layout), h5::Type::i32,
                             layout, encoder);
      for (std::size_t first = 0; first < values.size(); first += 433) {  // pieces that straddle chunks
        const auto rows = static_cast<int64_t>(std::min<std::size_t>(433, values.size() - first));
        h5::append_rows(pipeline.get(), h5::Type::i32, values.data() + first, rows, 1);
        direct.append(values.data() + first, rows);
      }
      direct.finish();
      BOOST_CHECK_EQUAL(direct.rows(), static_cast<int64_t>(values.size()));
      h5::Handle written = h5::open_dataset(file.get(), "direct");
      for (int64_t row = 0; row < static_cast<int64_t>(values.size()); row += 1000) {
        const std::string expected = h5::read_chunk(pipeline.get(), row);
        BOOST_CHECK_EQUAL(h5::read_chunk(written.get(), row) == expected, true);
        if (compression == data::Compression::gzip) BOOST_CHECK_LT(expected.size(), 4000u);  // really compressed
      }
    }
  }
}

// The writer's threads change how a file is written, not what it holds.
BOOST_AUTO_TEST_CASE(text_file_independent_of_writer_threads) {
  TempDir dir;
  const data::TextExamples all = make_text(9000, 11, true);  // 3 example chunks, 7+ token chunks
  std::vector<std::string> files;
  for (int threads : {1, 4}) {
    files.push_back(dir.file(fmt::format("threads-{}.h5", threads)).string());
    data::WriterOptions options;
    options.threads = threads;
    data::DatasetWriter writer(files.back(), text_attributes(), options, false);
    writer.begin_text_split("train", true);
    append_in_pieces(writer, all, 1999);
    writer.commit();
  }
  for (const auto& file : files) {
    const data::DatasetReader reader(file);
    reader.validate_split("train");
    const data::TextExamples whole = reader.read_text("train", 0, all.size());
    BOOST_CHECK(whole.offsets == all.offsets);
    BOOST_CHECK(whole.input_ids == all.input_ids);
    BOOST_CHECK(whole.token_type_ids == all.token_type_ids);
    BOOST_CHECK(whole.labels == all.labels);
    BOOST_CHECK(whole.source_index == all.source_index);
  }
  data::WriterOptions bad;
  bad.threads = 0;
  BOOST_CHECK_THROW(data::DatasetWriter(dir.file("zero.h5"), text_attributes(), bad, false), Error);
}

BOOST_AUTO_TEST_CASE(image_round_trip_and_statistics) {
  TempDir dir;
  const data::ImageExamples images = make_images(300, 3, 5, 4, 11);
  const auto path = write_image_file(dir.file("images.h5"), images);
  const data::DatasetReader reader(path);
  BOOST_CHECK(reader.task() == data::Task::image_classification);
  BOOST_CHECK(reader.tokenizer().empty());
  const data::SplitInfo info = reader.split_info("train");
  BOOST_CHECK_EQUAL(info.channels, 3);
  BOOST_CHECK_EQUAL(info.height, 5);
  BOOST_CHECK_EQUAL(info.width, 4);
  // Population mean/std of pixel/255 per channel, computed independently in double.
  for (int64_t c = 0; c < 3; ++c) {
    double sum = 0, square_sum = 0, count = 0;
    for (int64_t i = 0; i < images.size(); ++i) {
      for (int64_t p = 0; p < 20; ++p) {
        const double x = images.image(i)[c * 20 + p] / 255.0;
        sum += x;
        square_sum += x * x;
        count += 1;
      }
    }
    const double mean = sum / count;
    BOOST_CHECK_CLOSE(info.mean[c], mean, 1e-9);
    BOOST_CHECK_CLOSE(info.std[c], std::sqrt(square_sum / count - mean * mean), 1e-7);
  }
  reader.validate_split("train");
  const data::ImageExamples read = reader.read_images("train", 0, 300);
  BOOST_CHECK(read.pixels == images.pixels);
  BOOST_CHECK(read.labels == images.labels);
  const data::ImageExamples picked = reader.read_image_indices("train", {299, 0, 150, 0});
  BOOST_CHECK(picked.pixels == data::gather(images, {299, 0, 150, 0}).pixels);
}

BOOST_AUTO_TEST_CASE(writer_refuses_existing_file_up_front) {
  TempDir dir;
  const auto path = dir.file("exists.h5");
  std::ofstream(path) << "not empty";
  const std::string message = error_of([&] { data::DatasetWriter(path, text_attributes(), {}, false); });
  BOOST_CHECK(contains(message, path.string()) && contains(message, "--overwrite"));
  BOOST_CHECK_EQUAL(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // no temporary
  write_text_file(path, make_text(10, 1, false), false);  // overwrite = true replaces it
  BOOST_CHECK_EQUAL(data::DatasetReader(path).split_info("train").num_examples, 10);
}

BOOST_AUTO_TEST_CASE(writer_without_commit_leaves_nothing) {
  TempDir dir;
  const auto path = dir.file("abandoned.h5");
  fs::path temporary;
  {
    data::DatasetWriter writer(path, text_attributes(), {}, false);
    temporary = writer.temporary_path();
    BOOST_CHECK(fs::exists(temporary));
    writer.write_text_split("train", make_text(10, 1, false), false);
  }
  BOOST_CHECK(!fs::exists(temporary));
  BOOST_CHECK(!fs::exists(path));
}

BOOST_AUTO_TEST_CASE(writer_checks_examples) {
  TempDir dir;
  const auto path = dir.file("bad.h5");
  data::TextExamples text = make_text(20, 3, false);
  text.input_ids[text.offsets[7] + 1] = 1000;  // == vocab_size
  data::DatasetWriter writer(path, text_attributes(), {}, false);
  BOOST_CHECK(contains(error_of([&] { writer.write_text_split("train", text, false); }), "token id 1000 out of range"));

  data::DatasetWriter labels_writer(dir.file("labels.h5"), text_attributes(), {}, false);
  data::TextExamples bad_label = make_text(20, 3, false);
  bad_label.labels[4] = 3;
  BOOST_CHECK(contains(error_of([&] { labels_writer.write_text_split("validation", bad_label, false); }), "example 4: label 3"));

  data::DatasetWriter rules(dir.file("rules.h5"), text_attributes(), {}, false);
  BOOST_CHECK(contains(error_of([&] { rules.begin_text_split("dev", false); }), "unknown split 'dev'"));
  BOOST_CHECK(contains(error_of([&] { rules.write_image_split("train", make_images(2, 1, 2, 2, 1)); }), "cannot write images"));
  rules.write_text_split("train", make_text(5, 1, false), false);
  BOOST_CHECK(contains(error_of([&] { rules.write_text_split("train", make_text(5, 1, false), false); }), "written twice"));
  BOOST_CHECK(contains(error_of([&] { rules.write_text_split("test", make_text(5, 1, true), false); }), "token_type_ids"));

  data::FileAttributes no_vocab = text_attributes();
  no_vocab.tokenizer = nlohmann::json::object();
  BOOST_CHECK(contains(error_of([&] { data::DatasetWriter(dir.file("v.h5"), no_vocab, {}, false); }), "vocab_size"));
}

BOOST_AUTO_TEST_CASE(reader_rejects_what_is_not_a_dataset_file) {
  TempDir dir;
  BOOST_CHECK(contains(error_of([&] { data::DatasetReader(dir.file("missing.h5")); }), "no such file"));
  std::ofstream(dir.file("text.h5")) << "hello";
  BOOST_CHECK(contains(error_of([&] { data::DatasetReader(dir.file("text.h5")); }), "not an HDF5 file"));

  const auto path = write_text_file(dir.file("v.h5"), make_text(10, 1, false), false);
  overwrite_int64_attribute(path, "/", "hpctrain_format", 2);
  BOOST_CHECK(contains(error_of([&] { data::DatasetReader{path}; }), "hpctrain_format = 2 is not supported: expected 1"));

  {
    data::h5::Handle file = data::h5::create_file(dir.file("plain.h5"));
    data::h5::close_file(file);
  }
  BOOST_CHECK(contains(error_of([&] { data::DatasetReader(dir.file("plain.h5")); }), "missing root attribute 'hpctrain_format'"));

  const auto good = write_text_file(dir.file("good.h5"), make_text(10, 1, false), false);
  const data::DatasetReader reader(good);
  const std::string message = error_of([&] { (void)reader.split_info("test"); });
  BOOST_CHECK(contains(message, "no split 'test'") && contains(message, "available: train"));
}

BOOST_AUTO_TEST_CASE(validation_names_dataset_and_index) {
  TempDir dir;
  const data::TextExamples text = make_text(100, 5, true);
  auto fresh = [&](const std::string& name) { return write_text_file(dir.file(name), text, true); };
  auto validation_error = [](const fs::path& path) {
    return error_of([&] { data::DatasetReader(path).validate_split("train"); });
  };

  auto path = fresh("monotone.h5");
  overwrite_element<int64_t>(path, "train", "offsets", 40, text.offsets[38]);
  std::string message = validation_error(path);
  BOOST_CHECK_MESSAGE(contains(message, "/train/offsets[40]") && contains(message, "non-decreasing"), message);

  path = fresh("vocab.h5");
  const int64_t token = text.offsets[17] + 1;
  overwrite_element<int32_t>(path, "train", "input_ids", token, 1000);
  message = validation_error(path);
  BOOST_CHECK_MESSAGE(contains(message, fmt::format("/train/input_ids[{}] = 1000 (example 17)", token)) &&
                          contains(message, "vocab_size"), message);

  path = fresh("label.h5");
  overwrite_element<int64_t>(path, "train", "labels", 63, 3);
  message = validation_error(path);
  BOOST_CHECK_MESSAGE(contains(message, "/train/labels[63] = 3") && contains(message, "0 <= label < 3"), message);
  // Only the examples that hold the corruption fail: a rank validating another range does not see it.
  data::DatasetReader(path).validate_examples("train", 0, 63);
  BOOST_CHECK(!validation_error(path).empty());

  path = fresh("types.h5");
  overwrite_element<uint8_t>(path, "train", "token_type_ids", 5, 2);
  BOOST_CHECK(contains(validation_error(path), "/train/token_type_ids[5] = 2"));

  path = fresh("count.h5");
  overwrite_int64_attribute(path, "train", "num_examples", 101);
  message = validation_error(path);
  BOOST_CHECK_MESSAGE(contains(message, "/train/labels: expected int64 [101], got int64 [100]"), message);
}

BOOST_AUTO_TEST_CASE(structural_errors_from_raw_files) {
  TempDir dir;
  // Two examples of 3 tokens: offsets [0, 3, 6].
  const std::vector<int64_t> ids = {101, 5, 102, 101, 6, 102};
  auto write = [&](const std::string& name, std::vector<RawDataset> datasets) {
    write_raw_text_file(dir.file(name), 2, datasets);
    return error_of([&] { data::DatasetReader(dir.file(name)).validate_split("train"); });
  };
  const RawDataset labels{"labels", data::h5::Type::i64, {0, 1}}, source{"source_index", data::h5::Type::i64, {0, 1}};
  const RawDataset offsets{"offsets", data::h5::Type::i64, {0, 3, 6}};
  const RawDataset input_ids{"input_ids", data::h5::Type::i32, ids};

  BOOST_CHECK_EQUAL(write("ok.h5", {input_ids, offsets, labels, source}), "");

  std::string message = write("dtype.h5", {{"input_ids", data::h5::Type::i64, ids}, offsets, labels, source});
  BOOST_CHECK_MESSAGE(contains(message, "/train/input_ids: expected int32 [any], got int64 [6]"), message);

  message = write("missing.h5", {input_ids, labels, source});
  BOOST_CHECK_MESSAGE(contains(message, "no dataset 'offsets'"), message);

  message = write("first.h5", {input_ids, {"offsets", data::h5::Type::i64, {1, 3, 6}}, labels, source});
  BOOST_CHECK_MESSAGE(contains(message, "/train/offsets[0] = 1: expected 0"), message);

  message = write("last.h5", {input_ids, {"offsets", data::h5::Type::i64, {0, 3, 5}}, labels, source});
  BOOST_CHECK_MESSAGE(contains(message, "/train/offsets[2] = 5: expected the length of input_ids, 6"), message);

  message = write("short.h5", {input_ids, offsets, {"labels", data::h5::Type::i64, {0}}, source});
  BOOST_CHECK_MESSAGE(contains(message, "/train/labels: expected int64 [2], got int64 [1]"), message);

  message = write("types.h5", {input_ids, offsets, labels, source, {"token_type_ids", data::h5::Type::u8, {0, 0, 0}}});
  BOOST_CHECK_MESSAGE(contains(message, "/train/token_type_ids: expected uint8 [6], got uint8 [3]"), message);

  message = write("negative.h5", {input_ids, offsets, labels, {"source_index", data::h5::Type::i64, {0, -1}}});
  BOOST_CHECK_MESSAGE(contains(message, "/train/source_index[1] = -1"), message);
}

BOOST_AUTO_TEST_CASE(hdf5_call_errors_record_the_expression) {
  // An HDF5 failure below the reader's own checks still says which call failed, where.
  const std::string message = error_of([] { (void)data::h5::open_file_for_update("/nonexistent/dir/file.h5"); });
  BOOST_CHECK_MESSAGE(contains(message, "HDF5 call failed: H5Fopen") && contains(message, "h5_handle.cpp:"), message);
}

BOOST_AUTO_TEST_SUITE_END()
