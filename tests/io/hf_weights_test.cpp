// Hugging Face weight folders: find_weights (and the pickle refusal), sharded save/load, index errors.
#include "hpctrain/io/safetensors.hpp"
#include "io_test_util.hpp"

#include <boost/test/unit_test.hpp>

#include <cstring>

namespace io = hpctrain::io;
namespace fs = std::filesystem;
using io::test::raw_bytes;
using io::test::read_bytes;
using io::test::require_error;
using io::test::ScratchDir;
using io::test::view_of;
using io::test::write_bytes;

namespace {

// Five tensors, 67 bytes: with a 32-byte max they fill three shards ({a, b}, {c, d}, {e}).
struct SmallModel {
  std::string a = raw_bytes<float>({1, 2, 3, 4});
  std::string b = raw_bytes<float>({5, 6, 7, 8});
  std::string c = raw_bytes<float>({9, 10, 11, 12});
  std::string d = raw_bytes<std::int64_t>({-1, 1});
  std::string e = raw_bytes<std::uint8_t>({7, 8, 9});
  std::vector<io::TensorView> views{
      view_of("a", io::DType::f32, {4}, a),       view_of("b", io::DType::f32, {2, 2}, b),
      view_of("c", io::DType::f32, {4}, c),       view_of("d", io::DType::i64, {2}, d),
      view_of("e", io::DType::u8, {3}, e),
  };
};

void check_loaded(const io::SafetensorsCheckpoint& checkpoint, const SmallModel& model) {
  BOOST_TEST(checkpoint.names() == std::vector<std::string>({"a", "b", "c", "d", "e"}), boost::test_tools::per_element());
  for (const io::TensorView& want : model.views) {
    const io::TensorView& got = checkpoint.tensor(want.name);
    BOOST_TEST(got.shape == want.shape, boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(got.nbytes, want.nbytes);
    BOOST_TEST(std::memcmp(got.data, want.data, want.nbytes) == 0);
  }
}

void save_three_shards(const fs::path& dir, const SmallModel& model) {
  const io::SavedWeights saved = io::save_sharded(dir, model.views, {{"format", "pt"}}, 32);
  BOOST_REQUIRE(saved.layout == io::WeightsLayout::sharded);
  BOOST_REQUIRE_EQUAL(saved.files.size(), 4u);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(hf_weights)

BOOST_AUTO_TEST_CASE(sharded_save_writes_transformers_layout_and_loads_back) {
  ScratchDir dir;
  const SmallModel model;
  save_three_shards(dir.path(), model);
  for (const char* name : {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json"}) {
    BOOST_TEST(fs::is_regular_file(dir / name), name);
  }
  BOOST_TEST(!fs::exists(dir / "model.safetensors"));
  const std::string expected_index = R"({
  "metadata": {
    "total_parameters": 17,
    "total_size": 67
  },
  "weight_map": {
    "a": "model-00001-of-00003.safetensors",
    "b": "model-00001-of-00003.safetensors",
    "c": "model-00002-of-00003.safetensors",
    "d": "model-00002-of-00003.safetensors",
    "e": "model-00003-of-00003.safetensors"
  }
}
)";
  BOOST_TEST(read_bytes(dir / "model.safetensors.index.json") == expected_index);

  const io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(dir.path());
  BOOST_TEST((checkpoint.layout() == io::WeightsLayout::sharded));
  BOOST_TEST(checkpoint.shards().size() == 3u);
  BOOST_TEST(checkpoint.shards()[1].metadata().at("format") == "pt");
  check_loaded(checkpoint, model);
}

BOOST_AUTO_TEST_CASE(small_models_get_one_file_and_stale_weights_go) {
  ScratchDir dir;
  const SmallModel model;
  save_three_shards(dir.path(), model);
  write_bytes(dir / "config.json", "{}");  // not weights: must survive

  const io::SavedWeights single = io::save_sharded(dir.path(), model.views);  // 5 GB default max
  BOOST_TEST((single.layout == io::WeightsLayout::single_file));
  BOOST_TEST(fs::is_regular_file(dir / "model.safetensors"));
  BOOST_TEST(!fs::exists(dir / "model.safetensors.index.json"));
  BOOST_TEST(!fs::exists(dir / "model-00001-of-00003.safetensors"));
  BOOST_TEST(fs::exists(dir / "config.json"));
  check_loaded(io::SafetensorsCheckpoint::open(dir.path()), model);
  BOOST_TEST(io::SafetensorsFile(dir / "model.safetensors").metadata().at("format") == "pt");

  // Back to shards (two this time): the single file would shadow them, so it must go.
  io::save_sharded(dir.path(), model.views, {{"format", "pt"}}, 48);
  BOOST_TEST(!fs::exists(dir / "model.safetensors"));
  BOOST_TEST(fs::exists(dir / "model-00002-of-00002.safetensors"));
  BOOST_TEST(!fs::exists(dir / "model-00003-of-00003.safetensors"));
  check_loaded(io::SafetensorsCheckpoint::open(dir.path()), model);
}

BOOST_AUTO_TEST_CASE(missing_shard_is_an_error) {
  ScratchDir dir;
  save_three_shards(dir.path(), SmallModel{});
  fs::remove(dir / "model-00002-of-00003.safetensors");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); },
                {"model.safetensors.index.json", "'model-00002-of-00003.safetensors'", "missing"});
}

BOOST_AUTO_TEST_CASE(index_tensor_absent_from_its_shard) {
  ScratchDir dir;
  save_three_shards(dir.path(), SmallModel{});
  std::string index = read_bytes(dir / "model.safetensors.index.json");
  index.replace(index.find("\"a\":"), 4, "\"ghost\": \"model-00003-of-00003.safetensors\",\n    \"a\":");
  write_bytes(dir / "model.safetensors.index.json", index);
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); },
                {"'ghost'", "'model-00003-of-00003.safetensors'", "does not hold it"});
}

BOOST_AUTO_TEST_CASE(tensor_in_two_shards_or_unlisted) {
  ScratchDir dir;
  const SmallModel model;
  io::save_safetensors(dir / "s1.safetensors", {model.views[0]});
  io::save_safetensors(dir / "s2.safetensors", {model.views[0], model.views[1]});
  write_bytes(dir / "model.safetensors.index.json",
              R"({"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); },
                {"'a'", "in shard 's1.safetensors' and in shard 's2.safetensors'"});

  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"b": "s2.safetensors"}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"'s2.safetensors'", "'a'", "does not list"});
}

BOOST_AUTO_TEST_CASE(hostile_or_broken_index) {
  ScratchDir dir;
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "../../etc/passwd"}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"'a'", "../../etc/passwd", "no path"});
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "/abs.safetensors"}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"/abs.safetensors"});
  write_bytes(dir / "model.safetensors.index.json", R"({"weight_map": {"a": 3}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"'a'", "string"});
  write_bytes(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"'weight_map'"});
  write_bytes(dir / "model.safetensors.index.json", "{");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); }, {"index.json", "not valid JSON"});
}

BOOST_AUTO_TEST_CASE(pytorch_pickles_are_refused_with_a_conversion_hint) {
  ScratchDir dir;
  write_bytes(dir / "pytorch_model.bin", "PK\x03\x04 pretend pickle");
  require_error([&] { (void)io::find_weights(dir.path()); },
                {"pytorch_model.bin is a pickle, which can run arbitrary code; hpctrain does not load it",
                 "from transformers import AutoModel;", "safe_serialization=True", dir.path().string()});
  // With a config.json the hint names the architecture, so the task head is kept.
  write_bytes(dir / "config.json", R"({"architectures": ["DistilBertForSequenceClassification"]})");
  require_error([&] { (void)io::SafetensorsCheckpoint::open(dir.path()); },
                {"from transformers import DistilBertForSequenceClassification;",
                 "DistilBertForSequenceClassification.from_pretrained("});
  // Sharded pickles too.
  ScratchDir sharded;
  write_bytes(sharded / "pytorch_model.bin.index.json", "{}");
  require_error([&] { (void)io::find_weights(sharded.path()); }, {"pytorch_model.bin.index.json", "pickle"});
  // Safetensors present: preferred, the pickle is ignored.
  io::save_safetensors(dir / "model.safetensors", {});
  BOOST_TEST(io::find_weights(dir.path()).path == dir / "model.safetensors");
}

BOOST_AUTO_TEST_CASE(find_weights_prefers_the_single_file_and_explains_empty_folders) {
  ScratchDir dir;
  require_error([&] { (void)io::find_weights(dir.path()); }, {"no model.safetensors", "holds: []"});
  write_bytes(dir / "vocab.txt", "[PAD]\n");
  require_error([&] { (void)io::find_weights(dir.path()); }, {"holds: [vocab.txt]"});
  require_error([&] { (void)io::find_weights(dir / "nope"); }, {"nope", "does not exist"});
  write_bytes(dir / "model.safetensors.index.json", "{}");
  BOOST_TEST((io::find_weights(dir.path()).layout == io::WeightsLayout::sharded));
  io::save_safetensors(dir / "model.safetensors", {});
  const io::WeightsLocation location = io::find_weights(dir.path());
  BOOST_TEST((location.layout == io::WeightsLayout::single_file));
  BOOST_TEST(location.path == dir / "model.safetensors");
}

BOOST_AUTO_TEST_SUITE_END()
