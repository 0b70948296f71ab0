// Size and read speed of the HDF5 dataset file with and without gzip, on synthetic data shaped like the
// real thing: text = zipf-distributed token ids (BERT vocabulary size), log-normal lengths around 60
// tokens; images = 28x28 MNIST-like strokes on a black background (most pixels 0).
// Prints one markdown table per task (the numbers in docs/hdf5-format.md come from here).
//
//   bench_hdf5_compression [out_dir=/tmp] [num_text=100000] [num_images=60000] [repeats=3] [keep]
//   (keep: leave the files in out_dir instead of deleting them)
//
// Reads are warm-page-cache (the files were just written), so they measure HDF5 + decompression, not disk;
// times are CPU seconds of the reading thread (best of `repeats`), robust on a shared machine.
// Sequential: the whole split in pieces of 8192 examples (how validation and block streaming read; pieces
// keep allocations below glibc's mmap threshold, so page faults, which are slow on VMs, do not hide the
// HDF5 cost). Random: batches of 32 sorted random indices (what global-shuffle streaming does), per batch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "hpctrain/core/random.hpp"
#include "hpctrain/data/dataset_reader.hpp"
#include "hpctrain/data/dataset_writer.hpp"

using namespace hpctrain;
namespace fs = std::filesystem;

namespace {

constexpr int64_t kVocabSize = 30522;
constexpr int64_t kRandomBatch = 32;
constexpr int64_t kRandomBatches = 500;
constexpr int64_t kSequentialPiece = 8192;
bool keep_files = false;

double uniform(SplitMix64& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

// Token ids: zipf(s = 1.1) over frequency ranks, ranks mapped to ids by a fixed permutation.
data::TextExamples make_text(int64_t n) {
  SplitMix64 rng(1);
  std::vector<double> cdf(kVocabSize);
  double total = 0;
  for (int64_t r = 0; r < kVocabSize; ++r) cdf[r] = (total += 1.0 / std::pow(static_cast<double>(r + 1), 1.1));
  std::vector<int64_t> id_of_rank(kVocabSize);
  for (int64_t r = 0; r < kVocabSize; ++r) id_of_rank[r] = r;
  shuffle(id_of_rank, 7);
  data::TextExamples text;
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    const double normal = std::sqrt(-2 * std::log(1 - uniform(rng))) * std::cos(2 * M_PI * uniform(rng));
    const auto length = std::clamp<int64_t>(std::llround(std::exp(std::log(52.0) + 0.55 * normal)), 5, 512);
    ids.assign(static_cast<size_t>(length), 0);
    for (auto& id : ids) {
      const auto rank = std::lower_bound(cdf.begin(), cdf.end(), uniform(rng) * total) - cdf.begin();
      id = static_cast<int32_t>(id_of_rank[std::min<int64_t>(rank, kVocabSize - 1)]);
    }
    ids.front() = 101;
    ids.back() = 102;
    text.append(ids, {}, static_cast<int64_t>(rng.below(4)), i);
  }
  return text;
}

// 2-4 strokes of width ~2 px inside the central 20x20 box, soft edges; background 0.
data::ImageExamples make_images(int64_t n) {
  SplitMix64 rng(2);
  data::ImageExamples images;
  images.height = images.width = 28;
  std::vector<uint8_t> image(28 * 28);
  for (int64_t i = 0; i < n; ++i) {
    std::fill(image.begin(), image.end(), 0);
    const int strokes = 2 + static_cast<int>(rng.below(3));
    for (int s = 0; s < strokes; ++s) {
      const double x0 = 4 + 20 * uniform(rng), y0 = 4 + 20 * uniform(rng);
      const double x1 = 4 + 20 * uniform(rng), y1 = 4 + 20 * uniform(rng);
      for (int y = 0; y < 28; ++y) {
        for (int x = 0; x < 28; ++x) {
          const double dx = x1 - x0, dy = y1 - y0, length2 = dx * dx + dy * dy + 1e-9;
          const double t = std::clamp(((x - x0) * dx + (y - y0) * dy) / length2, 0.0, 1.0);
          const double d = std::hypot(x - (x0 + t * dx), y - (y0 + t * dy));
          const double v = std::clamp(1.6 - d, 0.0, 1.0) * 255;
          image[y * 28 + x] = static_cast<uint8_t>(std::max<double>(image[y * 28 + x], v));
        }
      }
    }
    images.append(image.data(), static_cast<int64_t>(rng.below(10)), i);
  }
  return images;
}

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

// Best of `repeats` runs, in CPU seconds of this thread: the work is single-threaded and CPU-bound (warm
// page cache), and CPU time stays meaningful on a machine shared with other jobs, where wall time does not.
double seconds_of(const std::function<void()>& action, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double start = thread_cpu_seconds();
    action();
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

std::vector<std::vector<int64_t>> random_batches(int64_t n) {
  SplitMix64 rng(3);
  std::vector<std::vector<int64_t>> batches(kRandomBatches);
  for (auto& batch : batches) {
    for (int64_t i = 0; i < kRandomBatch; ++i) batch.push_back(static_cast<int64_t>(rng.below(static_cast<uint64_t>(n))));
    std::sort(batch.begin(), batch.end());
  }
  return batches;
}

struct Variant {
  std::string name;
  data::WriterOptions options;
};

template <typename Write, typename ReadAll, typename ReadIndices>
void run_table(const char* title, const fs::path& dir, int64_t n, double payload_mb, int repeats, Write write,
               ReadAll read_all, ReadIndices read_indices) {
  const std::vector<Variant> variants = {{"none", {data::Compression::none, 0}},
                                         {"gzip-1", {data::Compression::gzip, 1}},
                                         {"gzip-4", {data::Compression::gzip, 4}},
                                         {"gzip-6", {data::Compression::gzip, 6}},
                                         {"gzip-9", {data::Compression::gzip, 9}}};
  const auto batches = random_batches(n);
  std::printf("\n%s (%lld examples, %.1f MB of arrays in memory)\n\n", title, static_cast<long long>(n), payload_mb);
  std::printf("| compression | file MB | ratio | write CPU s | sequential read CPU s | MB/s | random batch of %lld, CPU ms |\n",
              static_cast<long long>(kRandomBatch));
  std::printf("|---|---|---|---|---|---|---|\n");
  double none_bytes = 0;
  for (const Variant& variant : variants) {
    const fs::path path = dir / fmt::format("bench-{}-{}.h5", title[0] == 't' ? "text" : "images", variant.name);
    const double write_s = seconds_of([&] { write(path, variant.options); }, 1);
    const auto bytes = static_cast<double>(fs::file_size(path));
    if (variant.name == "none") none_bytes = bytes;
    const data::DatasetReader reader(path);
    const double read_s = seconds_of([&] { read_all(reader, n); }, repeats);
    const double random_s = seconds_of([&] {
      for (const auto& batch : batches) read_indices(reader, batch);
    }, repeats);
    std::printf("| %s | %.1f | %.2f | %.2f | %.3f | %.0f | %.3f |\n", variant.name.c_str(), bytes / 1e6,
                none_bytes / bytes, write_s, read_s, payload_mb / read_s, 1e3 * random_s / kRandomBatches);
    std::fflush(stdout);
    if (!keep_files) fs::remove(path);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path dir = argc > 1 ? argv[1] : "/tmp";
  const int64_t num_text = argc > 2 ? std::atoll(argv[2]) : 100000;
  const int64_t num_images = argc > 3 ? std::atoll(argv[3]) : 60000;
  const int repeats = argc > 4 ? std::atoi(argv[4]) : 3;
  keep_files = argc > 5;

  const data::TextExamples text = make_text(num_text);
  data::FileAttributes text_attributes;
  text_attributes.label_names = {"a", "b", "c", "d"};
  text_attributes.source = "synthetic";
  text_attributes.created_by = "bench_hdf5_compression";
  text_attributes.tokenizer = {{"vocab_size", kVocabSize}};
  const double text_mb = (text.input_ids.size() * 4.0 + text.size() * 24.0) / 1e6;
  std::printf("text: %lld tokens, %.1f per example\n", static_cast<long long>(text.num_tokens()),
              static_cast<double>(text.num_tokens()) / static_cast<double>(text.size()));
  run_table(
      "text", dir, num_text, text_mb, repeats,
      [&](const fs::path& path, const data::WriterOptions& options) {
        data::DatasetWriter writer(path, text_attributes, options, true);
        writer.write_text_split("train", text, false);
        writer.commit();
      },
      [](const data::DatasetReader& reader, int64_t n) {
        for (int64_t first = 0; first < n; first += kSequentialPiece) {
          (void)reader.read_text("train", first, std::min(n, first + kSequentialPiece));
        }
      },
      [](const data::DatasetReader& reader, const std::vector<int64_t>& batch) {
        (void)reader.read_text_indices("train", batch);
      });

  const data::ImageExamples images = make_images(num_images);
  int64_t zeros = 0;
  for (uint8_t pixel : images.pixels) zeros += pixel == 0;
  std::printf("\nimages: %.0f%% of pixels are 0\n", 100.0 * static_cast<double>(zeros) / static_cast<double>(images.pixels.size()));
  data::FileAttributes image_attributes;
  image_attributes.task = data::Task::image_classification;
  for (int i = 0; i < 10; ++i) image_attributes.label_names.push_back(std::to_string(i));
  image_attributes.source = "synthetic";
  image_attributes.created_by = "bench_hdf5_compression";
  const double image_mb = (images.pixels.size() + images.size() * 16.0) / 1e6;
  run_table(
      "images", dir, num_images, image_mb, repeats,
      [&](const fs::path& path, const data::WriterOptions& options) {
        data::DatasetWriter writer(path, image_attributes, options, true);
        writer.write_image_split("train", images);
        writer.commit();
      },
      [](const data::DatasetReader& reader, int64_t n) {
        for (int64_t first = 0; first < n; first += kSequentialPiece) {
          (void)reader.read_images("train", first, std::min(n, first + kSequentialPiece));
        }
      },
      [](const data::DatasetReader& reader, const std::vector<int64_t>& batch) {
        (void)reader.read_image_indices("train", batch);
      });
}
