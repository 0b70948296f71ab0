// ShardLoader: what each rank yields (ranks simulated in one process), prefetch vs none, streaming,
// resume, shutdown mid-epoch, and errors from corrupt files.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "../data/dataset_fixtures.hpp"
#include "hpctrain/loader/shard_loader.hpp"

using namespace hpctrain;
using namespace hpctrain::testing;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One yielded example: which, whether padding, and a checksum of the tokens the batch holds for it.
struct Yielded {
  int64_t example = 0;
  bool is_padding = false;
  uint64_t checksum = 0;
  int64_t label = 0;
  bool operator==(const Yielded& o) const {
    return example == o.example && is_padding == o.is_padding && checksum == o.checksum && label == o.label;
  }
};

std::vector<Yielded> unpack(const loader::Batch& batch) {
  std::vector<Yielded> out;
  for (int64_t i = 0; i < batch.size(); ++i) {
    Yielded y;
    y.example = batch.example_index[i].item<int64_t>();
    y.is_padding = batch.is_padding[i].item<bool>();
    y.label = batch.labels[i].item<int64_t>();
    const int64_t length = batch.attention_mask[i].sum().item<int64_t>();
    std::vector<int32_t> ids(static_cast<size_t>(length));
    for (int64_t t = 0; t < length; ++t) ids[t] = static_cast<int32_t>(batch.input_ids[i][t].item<int64_t>());
    y.checksum = token_checksum(ids.data(), length);
    out.push_back(y);
  }
  return out;
}

// Every batch of one epoch, from first_batch on.
std::vector<loader::Batch> run_epoch(loader::ShardLoader& loader, int64_t epoch, int64_t first_batch = 0) {
  loader.start_epoch(epoch, first_batch);
  std::vector<loader::Batch> batches;
  while (auto batch = loader.next()) batches.push_back(std::move(*batch));
  BOOST_CHECK(!loader.next());  // stays at the end
  return batches;
}

std::vector<Yielded> flatten(const std::vector<loader::Batch>& batches) {
  std::vector<Yielded> all;
  for (const auto& batch : batches) {
    auto part = unpack(batch);
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

bool same_batches(const std::vector<loader::Batch>& a, const std::vector<loader::Batch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i].input_ids, b[i].input_ids) || !torch::equal(a[i].attention_mask, b[i].attention_mask) ||
        !torch::equal(a[i].token_type_ids, b[i].token_type_ids) || !torch::equal(a[i].labels, b[i].labels) ||
        !torch::equal(a[i].example_index, b[i].example_index) || !torch::equal(a[i].is_padding, b[i].is_padding)) {
      return false;
    }
  }
  return true;
}

loader::LoaderOptions options_for(int rank, int world, data::ShuffleMode mode, int64_t batch = 8) {
  loader::LoaderOptions options;
  options.batch_size = batch;
  options.shuffle = mode;
  options.rank = rank;
  options.world_size = world;
  options.pad_to_multiple_of = 8;
  return options;
}

// A text file of 203 examples (an odd count, so 2 and 4 ranks pad) and the examples it holds.
struct TextFile {
  TempDir dir;
  data::TextExamples text = make_text(203, 17, /*pairs=*/true);
  fs::path path = write_text_file(dir.file("train.h5"), text, true);

  uint64_t checksum(int64_t example) const {
    return token_checksum(text.input_ids.data() + text.offsets[example], text.length(example));
  }
};

// Across all ranks' epochs: each example once outside padding, padding flagged, tokens as written.
void check_epoch_covers_split(const TextFile& file, const std::vector<std::vector<Yielded>>& per_rank) {
  std::map<int64_t, int> seen;
  size_t padding = 0;
  for (const auto& rank_yield : per_rank) {
    BOOST_CHECK_EQUAL(rank_yield.size(), per_rank.front().size());
    for (const Yielded& y : rank_yield) {
      BOOST_REQUIRE(y.example >= 0 && y.example < file.text.size());
      BOOST_CHECK_EQUAL(y.checksum, file.checksum(y.example));
      BOOST_CHECK_EQUAL(y.label, file.text.labels[y.example]);
      if (y.is_padding) {
        ++padding;
      } else {
        ++seen[y.example];
      }
    }
  }
  BOOST_CHECK_EQUAL(seen.size(), static_cast<size_t>(file.text.size()));
  for (const auto& [example, count] : seen) BOOST_CHECK_EQUAL(count, 1);
  BOOST_CHECK_EQUAL(padding, per_rank.size() * per_rank.front().size() - static_cast<size_t>(file.text.size()));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(shard_loader)

BOOST_AUTO_TEST_CASE(every_mode_covers_the_split_once) {
  const TextFile file;
  for (auto mode : {data::ShuffleMode::shard, data::ShuffleMode::global, data::ShuffleMode::none}) {
    for (int world : {1, 2, 4}) {
      for (int64_t cache : {int64_t{512} << 20, int64_t{1}}) {  // resident, then streamed
        BOOST_TEST_CONTEXT("mode " << data::to_string(mode) << " W=" << world << " cache " << cache) {
          std::vector<std::vector<Yielded>> per_rank;
          int64_t batches = -1;
          for (int rank = 0; rank < world; ++rank) {
            auto options = options_for(rank, world, mode);
            options.cache_bytes = cache;
            loader::ShardLoader loader(file.path, options);
            BOOST_CHECK_EQUAL(loader.streams(), cache == 1);
            const auto epoch = run_epoch(loader, 1);
            BOOST_CHECK_EQUAL(static_cast<int64_t>(epoch.size()), loader.batches_per_epoch());
            if (batches >= 0) BOOST_CHECK_EQUAL(loader.batches_per_epoch(), batches);
            batches = loader.batches_per_epoch();
            for (const auto& batch : epoch) BOOST_CHECK_EQUAL(batch.input_ids.size(1) % 8, 0);
            per_rank.push_back(flatten(epoch));
          }
          check_epoch_covers_split(file, per_rank);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(prefetch_yields_the_same_batches) {
  const TextFile file;
  for (auto mode : {data::ShuffleMode::shard, data::ShuffleMode::global}) {
    for (int64_t cache : {int64_t{512} << 20, int64_t{2000}}) {
      auto options = options_for(1, 2, mode);
      options.cache_bytes = cache;
      options.prefetch_batches = 0;
      loader::ShardLoader inline_loader(file.path, options);
      options.prefetch_batches = 3;
      loader::ShardLoader prefetching(file.path, options);
      BOOST_CHECK(same_batches(run_epoch(inline_loader, 2), run_epoch(prefetching, 2)));
    }
  }
}

BOOST_AUTO_TEST_CASE(global_order_does_not_depend_on_the_cache) {
  const TextFile file;
  auto options = options_for(0, 2, data::ShuffleMode::global);
  loader::ShardLoader resident(file.path, options);
  options.cache_bytes = 1;
  loader::ShardLoader streamed(file.path, options);
  BOOST_CHECK(same_batches(run_epoch(resident, 0), run_epoch(streamed, 0)));
}

BOOST_AUTO_TEST_CASE(epochs_shuffle_and_repeat) {
  const TextFile file;
  loader::ShardLoader loader(file.path, options_for(0, 2, data::ShuffleMode::shard));
  const auto first = flatten(run_epoch(loader, 0));
  const auto again = flatten(run_epoch(loader, 0));
  const auto second = flatten(run_epoch(loader, 1));
  BOOST_CHECK(first == again);
  BOOST_CHECK(!(first == second));
}

BOOST_AUTO_TEST_CASE(resume_equals_the_tail_of_an_epoch) {
  const TextFile file;
  for (auto mode : {data::ShuffleMode::shard, data::ShuffleMode::global}) {
    for (int64_t cache : {int64_t{512} << 20, int64_t{1500}}) {
      auto options = options_for(1, 2, mode);
      options.cache_bytes = cache;
      loader::ShardLoader loader(file.path, options);
      const auto full = run_epoch(loader, 3);
      const auto tail = run_epoch(loader, 3, 5);
      BOOST_CHECK(same_batches(tail, std::vector<loader::Batch>(full.begin() + 5, full.end())));
      BOOST_CHECK(run_epoch(loader, 3, loader.batches_per_epoch()).empty());
      BOOST_CHECK_THROW(loader.start_epoch(3, loader.batches_per_epoch() + 1), Error);
    }
  }
}

BOOST_AUTO_TEST_CASE(stops_cleanly_mid_epoch) {
  const TextFile file;
  auto options = options_for(0, 1, data::ShuffleMode::shard, 4);
  options.prefetch_batches = 1;
  options.cache_bytes = 1;
  {
    loader::ShardLoader loader(file.path, options);
    loader.start_epoch(0);
    BOOST_CHECK(loader.next().has_value());
    loader.start_epoch(1);  // restarts while the thread waits on a full queue
    BOOST_CHECK(loader.next().has_value());
  }  // destroyed mid-epoch: joins
  loader::ShardLoader unused(file.path, options);
  BOOST_CHECK_THROW((void)unused.next(), Error);  // before start_epoch
}

BOOST_AUTO_TEST_CASE(image_batches) {
  TempDir dir;
  const data::ImageExamples images = make_images(50, 1, 28, 28, 3);
  const auto path = write_image_file(dir.file("images.h5"), images);
  auto options = options_for(0, 1, data::ShuffleMode::none, 16);
  loader::ShardLoader loader(path, options);
  const auto batches = run_epoch(loader, 0);
  BOOST_REQUIRE_EQUAL(batches.size(), 4u);
  const data::SplitInfo& info = loader.split_info();
  const auto& batch = batches[1];
  BOOST_CHECK(batch.pixel_values.sizes() == torch::IntArrayRef({16, 1, 28, 28}));
  const int64_t example = batch.example_index[3].item<int64_t>();
  BOOST_CHECK_EQUAL(example, 19);  // none: file order
  BOOST_CHECK_EQUAL(batch.labels[3].item<int64_t>(), images.labels[19]);
  const double x = images.image(19)[100] / 255.0;
  BOOST_CHECK_SMALL(batch.pixel_values[3][0][3][16].item<float>() - (x - info.mean[0]) / info.std[0], 1e-5);
  // Normalized with the file's own statistics: the whole split has mean ~0 and std ~1.
  std::vector<torch::Tensor> all;
  for (const auto& b : batches) all.push_back(b.pixel_values);
  const auto stacked = torch::cat(all);
  BOOST_CHECK_SMALL(stacked.mean().item<double>(), 1e-4);
  BOOST_CHECK_CLOSE(stacked.std(/*unbiased=*/false).item<double>(), 1.0, 1e-2);
}

BOOST_AUTO_TEST_CASE(corrupt_files_fail_with_dataset_and_index) {
  TempDir dir;
  const data::TextExamples text = make_text(100, 23, false);
  auto corrupt = [&](const std::string& name, auto&& damage) {
    const auto path = write_text_file(dir.file(name), text, false);
    damage(path);
    return path;
  };
  const auto vocab = corrupt("vocab.h5", [&](const fs::path& p) {
    overwrite_element<int32_t>(p, "train", "input_ids", text.offsets[10] + 1, 5000);
  });
  const auto label = corrupt("label.h5", [&](const fs::path& p) { overwrite_element<int64_t>(p, "train", "labels", 70, 9); });
  const auto offsets = corrupt("offsets.h5", [&](const fs::path& p) {
    overwrite_element<int64_t>(p, "train", "offsets", 30, text.offsets[29] - 1);
  });
  for (int64_t cache : {int64_t{512} << 20, int64_t{1}}) {
    std::string message = error_of([&] { loader::ShardLoader(vocab, options_for(0, 1, data::ShuffleMode::shard)); });
    if (cache == 1) {
      auto options = options_for(0, 1, data::ShuffleMode::shard);
      options.cache_bytes = 1;
      message = error_of([&] { loader::ShardLoader(vocab, options); });
    }
    BOOST_CHECK_MESSAGE(contains(message, "/train/input_ids[") && contains(message, "= 5000 (example 10)"), message);
  }
  // Rank 1 of 2 owns examples [50, 100): it finds the bad label; rank 0 does not read it.
  std::string message = error_of([&] { loader::ShardLoader(label, options_for(1, 2, data::ShuffleMode::shard)); });
  BOOST_CHECK_MESSAGE(contains(message, "/train/labels[70] = 9"), message);
  BOOST_CHECK_EQUAL(error_of([&] { loader::ShardLoader(label, options_for(0, 2, data::ShuffleMode::shard)); }), "");

  message = error_of([&] { loader::ShardLoader(offsets, options_for(0, 1, data::ShuffleMode::global)); });
  BOOST_CHECK_MESSAGE(contains(message, "/train/offsets[30]") && contains(message, "non-decreasing"), message);

  // Global mode streaming: rank 0 validates [0, 50) only; the bad label surfaces from next() (the
  // background thread's error), given a seed whose permutation sends example 70 to rank 0.
  auto options = options_for(0, 2, data::ShuffleMode::global);
  options.cache_bytes = 1;
  data::SamplerConfig sampler{100, 0, 2, options.batch_size, false, data::ShuffleMode::global, 0, 0};
  for (;; ++sampler.seed) {
    const auto order = data::epoch_order(sampler, 0);
    if (std::any_of(order.begin(), order.end(), [](const data::SamplePosition& p) { return p.example == 70; })) break;
  }
  options.seed = sampler.seed;
  loader::ShardLoader streamed(label, options);
  message = error_of([&] { run_epoch(streamed, 0); });
  BOOST_CHECK_MESSAGE(contains(message, "/train/labels[70] = 9"), message);
}

BOOST_AUTO_TEST_SUITE_END()
