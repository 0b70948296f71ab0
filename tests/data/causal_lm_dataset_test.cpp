// Task causal-lm (docs/hdf5-format.md): token rows without labels. The writer writes no labels dataset and no
// label names; the reader reads the rows back with kNoLabel and refuses labels on either side.
#include <boost/test/unit_test.hpp>

#include "dataset_fixtures.hpp"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

data::FileAttributes causal_lm_attributes() {
  data::FileAttributes attributes = text_attributes();
  attributes.task = data::Task::causal_lm;
  attributes.label_names.clear();
  return attributes;
}

fs::path write_causal_lm_file(const fs::path& path, const data::TextExamples& rows) {
  data::DatasetWriter writer(path, causal_lm_attributes(), {}, /*overwrite=*/true);
  writer.write_text_split("train", rows, /*has_pairs=*/false);
  writer.commit();
  return path;
}

}  // namespace

BOOST_AUTO_TEST_CASE(causal_lm_round_trip_without_labels) {
  TempDir dir;
  const data::TextExamples rows = make_text(50, 7, false);
  const auto path = write_causal_lm_file(dir.file("lm.h5"), rows);
  const data::DatasetReader reader(path);
  BOOST_CHECK(reader.task() == data::Task::causal_lm);
  BOOST_CHECK(reader.label_names().empty());
  BOOST_CHECK_EQUAL(reader.vocab_size(), 1000);
  reader.validate_split("train");
  const data::TextExamples got = reader.read_text("train", 0, 50);
  BOOST_CHECK(got.input_ids == rows.input_ids);
  BOOST_CHECK(got.offsets == rows.offsets);
  BOOST_CHECK(got.source_index == rows.source_index);
  BOOST_CHECK(got.labels == std::vector<int64_t>(50, data::kNoLabel));
  BOOST_CHECK_EQUAL(reader.read_text_indices("train", {3, 1}).labels.size(), 2u);
  BOOST_CHECK(has(error_of([&] { (void)reader.read_labels("train", 0, 1); }), "a causal-lm file has no labels"));
  data::h5::Handle file = data::h5::open_file(path);
  data::h5::Handle group = data::h5::open_group(file.get(), "train");
  BOOST_CHECK(!data::h5::has_link(group.get(), data::schema::kLabels));
  BOOST_CHECK(data::parse_task("causal-lm") == data::Task::causal_lm);
}

BOOST_AUTO_TEST_CASE(causal_lm_files_have_no_label_names) {
  TempDir dir;
  data::FileAttributes labelled = causal_lm_attributes();
  labelled.label_names = {"a"};
  BOOST_CHECK(has(error_of([&] { data::DatasetWriter(dir.file("w.h5"), labelled, {}, false); }),
                  "task causal-lm has no labels, got label_names [\"a\"]"));
  data::FileAttributes no_vocab = causal_lm_attributes();
  no_vocab.tokenizer = nlohmann::json::object();
  BOOST_CHECK(has(error_of([&] { data::DatasetWriter(dir.file("v.h5"), no_vocab, {}, false); }), "vocab_size"));
  // A file that says causal-lm but names labels, and a classification file without label names, are refused.
  const auto lm = write_causal_lm_file(dir.file("lm.h5"), make_text(5, 1, false));
  {
    data::h5::Handle file = data::h5::open_file_for_update(lm);
    data::h5::write_string_attribute(file.get(), data::schema::kAttrLabelNames, "[\"a\"]");
  }
  BOOST_CHECK(has(error_of([&] { data::DatasetReader{lm}; }), "expected [] (a causal-lm file has no labels)"));
  const auto text = write_text_file(dir.file("text.h5"), make_text(5, 1, false), false);
  {
    data::h5::Handle file = data::h5::open_file_for_update(text);
    data::h5::write_string_attribute(file.get(), data::schema::kAttrLabelNames, "[]");
  }
  BOOST_CHECK(has(error_of([&] { data::DatasetReader{text}; }), "expected a non-empty JSON array of strings"));
}

// Note [Document boundaries]: rows packed from documents round-trip with their document_start flags (through
// hyperslab and index reads); hostile flags are named; the writer refuses what the reader would.
BOOST_AUTO_TEST_CASE(causal_lm_rows_keep_their_document_boundaries) {
  TempDir dir;
  const data::TextExamples documents = make_text(12, 3, false);
  data::TextExamples rows;
  for (int64_t first = 0; first < documents.size(); first += 3)
    rows.append_packed(data::gather(documents, {first, first + 1, first + 2}));
  auto write = [&](const std::string& name) {
    data::DatasetWriter writer(dir.file(name), causal_lm_attributes(), {}, /*overwrite=*/true);
    writer.write_text_split("train", rows, /*has_pairs=*/false, /*has_document_starts=*/true);
    writer.commit();
    return dir.file(name);
  };
  const auto path = write("packed.h5");
  const data::DatasetReader reader(path);
  BOOST_CHECK(reader.split_info("train").has_document_starts);
  reader.validate_split("train");
  BOOST_CHECK(reader.read_text("train", 0, 4).document_start == rows.document_start);
  const data::TextExamples picked = reader.read_text_indices("train", {2, 0});
  BOOST_CHECK(picked.document_start == data::gather(rows, {2, 0}).document_start);
  // An older file (no document_start) reads as rows of one sequence each.
  BOOST_CHECK(!data::DatasetReader(write_causal_lm_file(dir.file("old.h5"), documents)).read_text("train", 0, 2).has_document_starts());

  auto corrupt = [&](const std::string& name, int64_t at, uint8_t value) {
    const auto file = write(name);
    overwrite_element<uint8_t>(file, "train", "document_start", at, value);
    return error_of([&] { data::DatasetReader(file).validate_split("train"); });
  };
  std::string message = corrupt("two.h5", 1, 2);
  BOOST_CHECK_MESSAGE(has(message, "/train/document_start[1] = 2 (example 0): expected 0 or 1"), message);
  message = corrupt("first.h5", rows.offsets[2], 0);
  BOOST_CHECK_MESSAGE(has(message, fmt::format("/train/document_start[{}] = 0 (example 2): expected 1", rows.offsets[2])),
                      message);
  data::TextExamples bad = rows;
  bad.document_start[static_cast<std::size_t>(rows.offsets[1])] = 0;
  data::DatasetWriter writer(dir.file("refused.h5"), causal_lm_attributes(), {}, true);
  message = error_of([&] { writer.write_text_split("train", bad, false, true); });
  BOOST_CHECK_MESSAGE(has(message, "example 1, token 0: document_start 0, expected 1"), message);
  message = error_of([&] { data::DatasetWriter(dir.file("w.h5"), causal_lm_attributes(), {}, true).write_text_split(
                               "train", documents, false, true); });
  BOOST_CHECK_MESSAGE(has(message, "the split was begun with document boundaries but this piece has no document_start"),
                      message);
}
