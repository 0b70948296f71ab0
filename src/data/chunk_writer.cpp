#include "chunk_writer.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "hpctrain/core/error.hpp"

namespace hpctrain::data::h5 {
namespace {

// Chunks a writer may keep queued whatever ChunkEncoder::queue_bytes says, per worker.
constexpr std::size_t kMinPendingPerThread = 16;

// HDF5's shuffle filter: byte j of element i goes to j * count + i.
std::string shuffle_bytes(const char* raw, std::size_t bytes, std::size_t element_size) {
  std::string out(bytes, '\0');
  const std::size_t count = bytes / element_size;
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t j = 0; j < element_size; ++j) out[j * count + i] = raw[i * element_size + j];
  std::memcpy(out.data() + count * element_size, raw + count * element_size, bytes - count * element_size);
  return out;
}

}  // namespace

std::string encode_chunk(const void* raw, std::size_t bytes, std::size_t element_size, const Layout& layout) {
  const char* data = static_cast<const char*>(raw);
  if (layout.compression == Compression::none) return std::string(data, bytes);
  std::string shuffled;
  if (element_size > 1) {
    shuffled = shuffle_bytes(data, bytes, element_size);
    data = shuffled.data();
  }
  uLongf size = compressBound(static_cast<uLong>(bytes));
  std::string out(size, '\0');
  const int status = compress2(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(data),
                               static_cast<uLong>(bytes), layout.gzip_level);
  HPCTRAIN_CHECK(status == Z_OK, "zlib compress2 of a {}-byte chunk failed ({})", bytes, status);
  out.resize(size);
  return out;
}

ChunkEncoder::ChunkEncoder(int threads, std::size_t queue_bytes) : queue_bytes_(queue_bytes) {
  for (int t = 0; threads > 1 && t < threads; ++t) workers_.emplace_back([this] { work(); });
}

ChunkEncoder::~ChunkEncoder() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ChunkEncoder::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
  }
  wake_.notify_one();
}

void ChunkEncoder::work() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job->encoded = encode_chunk(job->raw.data(), job->raw.size(), job->element_size, job->layout);
    } catch (...) {
      job->error = std::current_exception();
    }
    std::string().swap(job->raw);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job->done = true;
    }
    finished_.notify_all();
  }
}

void ChunkEncoder::wait(Job& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return job.done; });
  if (job.error) std::rethrow_exception(job.error);
}

bool ChunkEncoder::done(const Job& job) {
  std::lock_guard<std::mutex> lock(mutex_);
  return job.done;
}

ChunkWriter::ChunkWriter(Handle dataset, Type type, Layout layout, std::shared_ptr<ChunkEncoder> encoder)
    : dataset_(std::move(dataset)),
      layout_(std::move(layout)),
      encoder_(std::move(encoder)),
      element_size_(size_of(type)) {
  HPCTRAIN_CHECK(layout_.row_shape.empty() && layout_.chunk_rows > 0, "ChunkWriter takes 1-D chunked datasets");
  chunk_bytes_ = static_cast<std::size_t>(layout_.chunk_rows) * element_size_;
}

void ChunkWriter::append(const void* data, int64_t rows) {
  const char* bytes = static_cast<const char*>(data);
  std::size_t size = static_cast<std::size_t>(rows) * element_size_;
  rows_ += rows;
  if (!tail_.empty()) {  // complete the tail first
    const std::size_t take = std::min(size, chunk_bytes_ - tail_.size());
    tail_.append(bytes, take);
    bytes += take;
    size -= take;
    if (tail_.size() < chunk_bytes_) return;
    add_chunk(tail_.data());
    tail_.clear();
  }
  for (; size >= chunk_bytes_; bytes += chunk_bytes_, size -= chunk_bytes_) add_chunk(bytes);
  tail_.assign(bytes, size);
  write_ready(0);
}

void ChunkWriter::add_chunk(const char* data) {
  auto job = std::make_shared<ChunkEncoder::Job>();
  job->element_size = element_size_;
  job->layout = layout_;
  if (encoder_->threads() == 0) {
    job->encoded = encode_chunk(data, chunk_bytes_, element_size_, layout_);
    job->done = true;
  } else {
    job->raw.assign(data, chunk_bytes_);
    encoder_->submit(job);
  }
  pending_.push_back(std::move(job));
  const std::size_t limit = std::max(kMinPendingPerThread * encoder_->threads(), encoder_->queue_bytes() / chunk_bytes_);
  if (pending_.size() > limit) write_ready(pending_.size() / 2);
}

// Writes the encoded chunks at the front of the queue: the first `wait_for` (waiting for them), then those
// already encoded.
void ChunkWriter::write_ready(std::size_t wait_for) {
  std::size_t count = 0;
  for (; count < pending_.size(); ++count) {
    ChunkEncoder::Job& job = *pending_[count];
    if (count < wait_for) {
      encoder_->wait(job);
    } else if (!encoder_->done(job)) {
      break;
    } else if (job.error) {
      std::rethrow_exception(job.error);
    }
  }
  if (count == 0) return;
  set_rows(dataset_.get(), written_rows_ + static_cast<int64_t>(count) * layout_.chunk_rows);
  for (std::size_t i = 0; i < count; ++i) {
    write_chunk(dataset_.get(), written_rows_, pending_.front()->encoded.data(), pending_.front()->encoded.size());
    written_rows_ += layout_.chunk_rows;
    pending_.pop_front();
  }
}

void ChunkWriter::finish() {
  write_ready(pending_.size());
  set_rows(dataset_.get(), rows_);
  if (tail_.empty()) return;
  tail_.resize(chunk_bytes_, '\0');
  const std::string chunk = encode_chunk(tail_.data(), chunk_bytes_, element_size_, layout_);
  write_chunk(dataset_.get(), written_rows_, chunk.data(), chunk.size());
  written_rows_ = rows_;
  tail_.clear();
}

}  // namespace hpctrain::data::h5
