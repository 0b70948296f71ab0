// CopyFence: orders host work after asynchronous device copies (Note [Device buckets] in gradient_reducer.cpp).
// A CUDA event recorded on the current stream of a device; on the CPU (and in builds without CUDA) there is
// nothing to wait for. Internal to src/ddp.
#pragma once

#include <c10/core/Device.h>

namespace hpctrain::ddp {

class CopyFence {
 public:
  CopyFence() = default;
  ~CopyFence();
  CopyFence(const CopyFence&) = delete;
  CopyFence& operator=(const CopyFence&) = delete;

  // Marks the point after the work queued so far on `device`'s current stream (nothing for the CPU).
  void record(const c10::Device& device);
  // Blocks the calling thread until the marked point has passed; returns at once when nothing is marked.
  // Any thread may wait (the communication thread does).
  void wait();

 private:
  void* event_ = nullptr;  // cudaEvent_t, created on the first record()
  int device_index_ = -1;
  bool pending_ = false;
};

// Blocks until the work queued so far on the calling thread's current stream of `device` is done (nothing for
// the CPU): the fence before MPI reads device memory that this thread's kernels wrote (Note [Fenced collectives]).
void wait_for_queued_work(const c10::Device& device);

}  // namespace hpctrain::ddp
