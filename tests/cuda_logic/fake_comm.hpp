// A fake two-rank communicator in one process, for the reducer's CUDA logic tested on the CPU: this process is
// rank 0 and the other rank holds the same values, so a sum doubles and max/min leave values as they are. It
// records every collective's buffer in a shared log (duplicates write to the same log) and answers
// accepts(cuda) as configured, standing in for a CUDA-aware MPI.
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hpctrain/dist/comm.hpp"

namespace fake {

// What happened, in order: ("fence" | "allreduce" | "allgather", the buffer's address).
struct Log {
  std::mutex mutex;
  std::vector<std::pair<std::string, const void*>> events;

  void add(const char* what, const void* data) {
    std::lock_guard<std::mutex> lock(mutex);
    events.emplace_back(what, data);
  }
  std::vector<std::pair<std::string, const void*>> snapshot() {
    std::lock_guard<std::mutex> lock(mutex);
    return events;
  }
};

inline at::ScalarType scalar_type_of(hpctrain::dist::DType dtype) {
  using hpctrain::dist::DType;
  switch (dtype) {
    case DType::u8: return at::kByte;
    case DType::i32: return at::kInt;
    case DType::i64: return at::kLong;
    case DType::f32: return at::kFloat;
    case DType::f64: return at::kDouble;
    case DType::bf16: return at::kBFloat16;
  }
  throw std::logic_error("unknown dtype");
}

class TwoRankComm final : public hpctrain::dist::Comm {
 public:
  explicit TwoRankComm(bool cuda_aware = false, std::shared_ptr<Log> log = std::make_shared<Log>())
      : cuda_aware_(cuda_aware), log_(std::move(log)) {}

  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 2; }
  void barrier() override {}
  void allreduce(void* data, std::size_t count, hpctrain::dist::DType dtype, hpctrain::dist::ReduceOp op) override {
    log_->add("allreduce", data);
    if (op != hpctrain::dist::ReduceOp::sum || count == 0) return;
    at::from_blob(data, {static_cast<int64_t>(count)}, at::TensorOptions().dtype(scalar_type_of(dtype))).mul_(2);
  }
  void broadcast(void*, std::size_t, int) override {}
  void allgather(const void* data, std::size_t bytes, void* out) override {
    std::memcpy(out, data, bytes);
    std::memcpy(static_cast<char*>(out) + bytes, data, bytes);
  }
  // The other rank's block is this rank's (it holds the same values).
  void allgather_in_place(void* data, std::size_t bytes) override {
    log_->add("allgather", data);
    std::memcpy(static_cast<char*>(data) + bytes, data, bytes);
  }
  [[noreturn]] void abort(int) override { throw std::runtime_error("abort"); }
  bool accepts(hpctrain::dist::MemoryKind kind) const override {
    return kind == hpctrain::dist::MemoryKind::host || cuda_aware_;
  }
  std::unique_ptr<hpctrain::dist::Comm> duplicate() override { return std::make_unique<TwoRankComm>(cuda_aware_, log_); }

  const std::shared_ptr<Log>& log() const { return log_; }

 private:
  bool cuda_aware_;
  std::shared_ptr<Log> log_;
};

}  // namespace fake
