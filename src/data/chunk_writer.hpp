// Private: appends rows to a chunked 1-D dataset by whole chunks, compressing them on worker threads and
// writing them with HDF5's direct chunk write (Note [Parallel chunk compression]).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "h5_handle.hpp"

namespace hpctrain::data::h5 {

// The bytes HDF5's filter pipeline stores for one chunk of `layout` (byte shuffle for multi-byte elements,
// then zlib at the layout's level; the raw bytes without compression). Thread-safe: no HDF5 call.
[[nodiscard]] std::string encode_chunk(const void* raw, std::size_t bytes, std::size_t element_size, const Layout& layout);

// Note [Parallel chunk compression]
// gzip is most of what writing a prepared file costs (200 MB of JSONL: 1.7 of 2.3 s on one core), and HDF5's
// own filter pipeline runs on the one thread that calls H5Dwrite (a serial HDF5 is not thread-safe). So the
// writer cuts the rows into the dataset's chunks itself, encodes them on worker threads exactly as the
// pipeline would (encode_chunk: same filters, same order, same zlib call) while the calling thread goes on
// (reading the next rows), and hands the encoded bytes to H5Dwrite_chunk in order, on the calling thread
// only. The last, partial chunk is zero-padded to the chunk size, as HDF5 pads edge chunks with the default
// fill value. Readers see an ordinary chunked, filtered dataset. With one thread nothing is queued: each
// chunk is encoded and written at once.

// Encodes chunks on `threads` worker threads (none for threads <= 1: encode() runs on the caller).
class ChunkEncoder {
 public:
  struct Job {
    std::string raw, encoded;
    std::size_t element_size = 1;
    Layout layout;
    bool done = false;
    std::exception_ptr error;
  };
  // queue_bytes: how many bytes of chunks one writer may have queued before it waits for the oldest; enough
  // to keep the workers busy while the caller prepares the next rows (a prep bucket takes ~0.1 s to read).
  ChunkEncoder(int threads, std::size_t queue_bytes);
  ~ChunkEncoder();
  ChunkEncoder(const ChunkEncoder&) = delete;
  ChunkEncoder& operator=(const ChunkEncoder&) = delete;

  // Worker threads; 0: encode on the caller, nothing is queued.
  [[nodiscard]] std::size_t threads() const { return workers_.size(); }
  [[nodiscard]] std::size_t queue_bytes() const { return queue_bytes_; }
  void submit(const std::shared_ptr<Job>& job);
  // Waits until `job` is encoded; rethrows its error.
  void wait(Job& job);
  // Whether `job` is encoded (no wait).
  bool done(const Job& job);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool stop_ = false;
  std::size_t queue_bytes_;
  std::vector<std::thread> workers_;
};

class ChunkWriter {
 public:
  ChunkWriter(Handle dataset, Type type, Layout layout, std::shared_ptr<ChunkEncoder> encoder);
  ChunkWriter(ChunkWriter&&) = default;
  // Appends `rows` elements; full chunks are encoded (queued when the encoder has threads) and written.
  void append(const void* data, int64_t rows);
  // Writes every queued chunk and the partial last one; the dataset then holds exactly the appended rows.
  void finish();
  [[nodiscard]] int64_t rows() const { return rows_; }

 private:
  void add_chunk(const char* data);
  void write_ready(std::size_t wait_for);

  Handle dataset_;
  Layout layout_;
  std::shared_ptr<ChunkEncoder> encoder_;
  std::size_t element_size_;
  std::size_t chunk_bytes_;
  int64_t rows_ = 0;           // appended so far
  int64_t written_rows_ = 0;   // in whole chunks on disk
  std::string tail_;           // the rows after the last full chunk
  std::deque<std::shared_ptr<ChunkEncoder::Job>> pending_;  // queued chunks, in row order
};

}  // namespace hpctrain::data::h5
