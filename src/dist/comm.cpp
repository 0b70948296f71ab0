#include "hpctrain/dist/comm.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/float_bits.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace hpctrain::dist {

void Comm::broadcast_string(std::string& text, int root) {
  uint64_t length = text.size();
  broadcast(&length, sizeof(length), root);
  text.resize(length);
  if (length > 0) broadcast(text.data(), length, root);
}

std::vector<Chunk> split_into_chunks(std::size_t total, std::size_t max_chunk) {
  HPCTRAIN_CHECK(max_chunk > 0, "split_into_chunks: max_chunk must be positive");
  std::vector<Chunk> chunks;
  chunks.reserve(total / max_chunk + 1);
  for (std::size_t offset = 0; offset < total; offset += max_chunk) {
    chunks.push_back({offset, std::min(max_chunk, total - offset)});
  }
  return chunks;
}

// Note [bf16 reduction]
void bf16_sum(const uint16_t* in, uint16_t* inout, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) inout[i] = f32_to_bf16(bf16_to_f32(in[i]) + bf16_to_f32(inout[i]));
}

namespace {
std::mutex g_cleanups_mutex;
std::map<uint64_t, std::function<void()>> g_cleanups;  // by registration id
uint64_t g_next_cleanup_id = 0;
}  // namespace

// Note [Cleanup before an abort]
AbortCleanup::AbortCleanup(std::function<void()> cleanup) {
  const std::lock_guard<std::mutex> lock(g_cleanups_mutex);
  id_ = g_next_cleanup_id++;
  g_cleanups.emplace(id_, std::move(cleanup));
}

AbortCleanup::~AbortCleanup() {
  const std::lock_guard<std::mutex> lock(g_cleanups_mutex);
  g_cleanups.erase(id_);
}

void run_abort_cleanups() noexcept {
  const std::lock_guard<std::mutex> lock(g_cleanups_mutex);
  for (auto& [id, cleanup] : g_cleanups) {
    try {
      cleanup();
    } catch (...) {  // the job ends next either way
    }
  }
  g_cleanups.clear();
}

void Comm::reduce_scatter(const void*, void*, std::size_t, DType, ReduceOp) {
  fail("this communicator (world_size {}) has no reduce-scatter (needed by --zero-stage 1 and 2)", world_size());
}

void Comm::allgather_in_place(void*, std::size_t) {
  fail("this communicator (world_size {}) has no in-place all-gather (needed by --zero-stage 1 and 2)", world_size());
}

std::unique_ptr<Comm> Comm::duplicate() {
  fail("this communicator (world_size {}) cannot be duplicated", world_size());
}

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::u8: return 1;
    case DType::bf16: return 2;
    case DType::i32: case DType::f32: return 4;
    case DType::i64: case DType::f64: return 8;
  }
  return 1;
}

namespace {
class SingleProcessComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  void barrier() override {}
  void allreduce(void*, std::size_t, DType, ReduceOp) override {}
  void broadcast(void*, std::size_t, int) override {}
  void allgather(const void* data, std::size_t bytes, void* out) override {
    if (bytes > 0) std::memcpy(out, data, bytes);
  }
  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp) override {
    if (count > 0 && send != recv) std::memmove(recv, send, count * size_of(dtype));
  }
  void allgather_in_place(void*, std::size_t) override {}
  [[noreturn]] void abort(int exit_code) override { std::_Exit(exit_code); }
  std::unique_ptr<Comm> duplicate() override { return std::make_unique<SingleProcessComm>(); }
};
}  // namespace

std::unique_ptr<Comm> make_single_process_comm() { return std::make_unique<SingleProcessComm>(); }

}  // namespace hpctrain::dist
