#include "hpctrain/loader/shard_loader.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <thread>

#include "bounded_queue.hpp"
#include "example_store.hpp"
#include "hpctrain/core/error.hpp"
#include "hpctrain/core/span.hpp"

namespace hpctrain::loader {
namespace {

// Where the examples of a batch come from (see the header comment).
enum class Residency {
  resident,   // one store loaded at construction, kept across epochs
  blocks,     // shard/none streaming: one store per block, loaded when the order reaches it
  per_batch,  // global streaming: each batch's examples read by index
};

// What the background thread sends: a batch, an error, or (neither) the end of the epoch.
struct Item {
  std::optional<Batch> batch;
  std::exception_ptr error;
};

void check_options(const LoaderOptions& options) {
  HPCTRAIN_CHECK(options.pad_to_multiple_of >= 1, "loader: pad_to_multiple_of {}: expected >= 1", options.pad_to_multiple_of);
  HPCTRAIN_CHECK(options.prefetch_batches >= 0, "loader: prefetch_batches {}: expected >= 0", options.prefetch_batches);
  HPCTRAIN_CHECK(options.cache_bytes >= 0, "loader: cache_bytes {}: expected >= 0", options.cache_bytes);
  HPCTRAIN_CHECK(options.pad_token_id >= 0, "loader: pad_token_id {}: expected >= 0", options.pad_token_id);
}

// The examples this rank's shard holds, sorted (one or two contiguous runs).
std::vector<int64_t> shard_examples(const data::SamplerConfig& sampler) {
  data::SamplerConfig whole = sampler;
  whole.block_size = 0;
  return data::block_examples(whole, 0);
}

}  // namespace

struct ShardLoader::Impl {
  LoaderOptions options;
  data::DatasetReader reader;
  data::SplitInfo info;
  data::SamplerConfig sampler;
  bool is_text = true;
  Residency residency = Residency::resident;
  ExampleStore resident_store;

  // The epoch being produced. Touched only by the producer: the worker thread, or next() without one.
  struct Epoch {
    std::vector<data::SamplePosition> order;
    int64_t next_batch = 0, end_batch = 0;
    std::map<int64_t, ExampleStore> blocks;  // streamed blocks in use (at most the two a batch spans)
  } epoch;
  bool started = false, finished = false;
  std::function<void(int64_t)> observer;  // set_batch_observer's, on the caller's thread
  int64_t handed = 0;                     // batches next() returned in this epoch (counted from first_batch)
  std::unique_ptr<BoundedQueue<Item>> queue;
  std::thread worker;

  Impl(const std::filesystem::path& file, LoaderOptions loader_options);
  void choose_residency();
  Batch make_batch(int64_t batch);
  Batch pinned_if_asked(Batch batch) const { return options.pin_memory ? pin_memory(std::move(batch)) : batch; }
  void produce();
  void stop_worker();
};

ShardLoader::Impl::Impl(const std::filesystem::path& file, LoaderOptions loader_options)
    : options(std::move(loader_options)), reader(file) {
  check_options(options);
  info = reader.split_info(options.split);
  is_text = data::is_text_task(reader.task());
  sampler.num_examples = info.num_examples;
  sampler.rank = options.rank;
  sampler.world_size = options.world_size;
  sampler.batch_size = options.batch_size;
  sampler.drop_last = options.drop_last;
  sampler.shuffle = options.shuffle;
  sampler.seed = options.seed;
  data::check_sampler_config(sampler);
  choose_residency();
}

// Loads what fits in cache_bytes now; otherwise validates this rank's contiguous share of the split, so
// that a corrupt file fails at construction on every path.
void ShardLoader::Impl::choose_residency() {
  const std::string& split = options.split;
  const int64_t per_rank = data::examples_per_rank(sampler), n = info.num_examples;
  if (options.shuffle == data::ShuffleMode::global) {
    if (estimate_bytes(reader, split, 0, n) <= options.cache_bytes) {
      std::vector<int64_t> all(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) all[i] = i;
      resident_store = ExampleStore::load_runs(reader, split, std::move(all));
      residency = Residency::resident;
      return;
    }
    residency = Residency::per_batch;
  } else {
    const std::vector<int64_t> shard = shard_examples(sampler);
    int64_t shard_bytes = 0;
    for (size_t i = 0; i < shard.size();) {  // the shard's contiguous runs
      size_t j = i + 1;
      while (j < shard.size() && shard[j] == shard[j - 1] + 1) ++j;
      shard_bytes += estimate_bytes(reader, split, shard[i], shard[j - 1] + 1);
      i = j;
    }
    if (shard_bytes <= options.cache_bytes) {
      resident_store = ExampleStore::load_runs(reader, split, shard);
      residency = Residency::resident;
      return;
    }
    // Two blocks can be live at once (a batch spanning a block boundary): each gets half the cache.
    const double fraction = static_cast<double>(options.cache_bytes / 2) / static_cast<double>(shard_bytes);
    sampler.block_size = std::max<int64_t>(options.batch_size, static_cast<int64_t>(fraction * per_rank));
    residency = Residency::blocks;
  }
  const int64_t begin = std::min(n, options.rank * per_rank), end = std::min(n, begin + per_rank);
  reader.validate_examples(split, begin, end);
}

Batch ShardLoader::Impl::make_batch(int64_t batch) {
  const span::Span loading("load batch", "loader", batch);
  const std::vector<data::SamplePosition> positions = data::batch_positions(epoch.order, sampler, batch);
  const ExampleStore* store_of_batch = &resident_store;
  ExampleStore batch_store;
  if (residency == Residency::per_batch) {
    std::vector<int64_t> wanted;
    for (const auto& position : positions) wanted.push_back(position.example);
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    batch_store = ExampleStore::load_scattered(reader, options.split, std::move(wanted));
    store_of_batch = &batch_store;
  } else if (residency == Residency::blocks) {
    // The order visits blocks one after another: blocks this batch does not use are done for the epoch.
    std::map<int64_t, ExampleStore> in_use;
    for (const auto& position : positions) {
      if (in_use.count(position.block)) continue;
      auto loaded = epoch.blocks.find(position.block);
      in_use.emplace(position.block, loaded != epoch.blocks.end()
                                         ? std::move(loaded->second)
                                         : ExampleStore::load_runs(reader, options.split,
                                                                   data::block_examples(sampler, position.block)));
    }
    epoch.blocks = std::move(in_use);
  }
  auto store_for = [&](const data::SamplePosition& position) -> const ExampleStore& {
    return residency == Residency::blocks ? epoch.blocks.at(position.block) : *store_of_batch;
  };
  if (is_text) {
    data::TextExamples examples;
    for (const auto& position : positions) store_for(position).append_to(examples, position.example);
    return collate_text(examples, positions, CollateOptions{options.pad_to_multiple_of, options.pad_token_id});
  }
  data::ImageExamples examples;
  examples.channels = info.channels;
  examples.height = info.height;
  examples.width = info.width;
  for (const auto& position : positions) store_for(position).append_to(examples, position.example);
  return collate_images(examples, positions, info.mean, info.std);
}

void ShardLoader::Impl::produce() {
  try {
    for (; epoch.next_batch < epoch.end_batch; ++epoch.next_batch) {
      if (!queue->push(Item{pinned_if_asked(make_batch(epoch.next_batch)), nullptr})) return;  // closed: stop early
    }
    queue->push(Item{});
  } catch (...) {
    queue->push(Item{std::nullopt, std::current_exception()});
  }
}

void ShardLoader::Impl::stop_worker() {
  if (!worker.joinable()) return;
  queue->close();
  worker.join();
}

ShardLoader::ShardLoader(const std::filesystem::path& file, LoaderOptions options)
    : impl_(std::make_unique<Impl>(file, std::move(options))) {}

ShardLoader::~ShardLoader() { impl_->stop_worker(); }

int64_t ShardLoader::batches_per_epoch() const { return data::batches_per_epoch(impl_->sampler); }
int64_t ShardLoader::examples_per_rank() const { return data::examples_per_rank(impl_->sampler); }
int64_t ShardLoader::num_examples() const { return impl_->info.num_examples; }
bool ShardLoader::streams() const { return impl_->residency != Residency::resident; }
const LoaderOptions& ShardLoader::options() const { return impl_->options; }
const data::DatasetReader& ShardLoader::reader() const { return impl_->reader; }
const data::SplitInfo& ShardLoader::split_info() const { return impl_->info; }

void ShardLoader::start_epoch(int64_t epoch, int64_t first_batch) {
  Impl& impl = *impl_;
  impl.stop_worker();
  const int64_t batches = batches_per_epoch();
  HPCTRAIN_CHECK(first_batch >= 0 && first_batch <= batches, "loader: cannot start epoch {} at batch {}: it has {} batches",
                 epoch, first_batch, batches);
  impl.epoch.order = data::epoch_order(impl.sampler, epoch);
  impl.epoch.next_batch = first_batch;
  impl.epoch.end_batch = batches;
  impl.epoch.blocks.clear();
  impl.started = true;
  impl.finished = false;
  impl.handed = first_batch;
  if (impl.options.prefetch_batches > 0) {
    impl.queue = std::make_unique<BoundedQueue<Item>>(static_cast<size_t>(impl.options.prefetch_batches));
    impl.worker = std::thread([&impl] {
      span::name_this_thread("loader");
      impl.produce();
    });
  }
}

void ShardLoader::set_batch_observer(std::function<void(int64_t batches_done)> observer) {
  impl_->observer = std::move(observer);
}

std::optional<Batch> ShardLoader::next() {
  std::optional<Batch> batch = next_batch();
  if (batch && impl_->observer) impl_->observer(++impl_->handed);
  return batch;
}

std::optional<Batch> ShardLoader::next_batch() {
  Impl& impl = *impl_;
  HPCTRAIN_CHECK(impl.started, "loader: next() called before start_epoch()");
  if (impl.finished) return std::nullopt;
  if (impl.options.prefetch_batches == 0) {
    if (impl.epoch.next_batch == impl.epoch.end_batch) {
      impl.finished = true;
      return std::nullopt;
    }
    return impl.pinned_if_asked(impl.make_batch(impl.epoch.next_batch++));
  }
  std::optional<Item> item = impl.queue->pop();
  if (!item || !item->batch) {
    impl.finished = true;
    if (item && item->error) std::rethrow_exception(item->error);
    return std::nullopt;
  }
  return std::move(item->batch);
}

}  // namespace hpctrain::loader
