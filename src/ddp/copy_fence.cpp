// CopyFence with the CUDA runtime's events (builds with HPCTRAIN_WITH_CUDA), a no-op otherwise.
#include "copy_fence.hpp"

#include "hpctrain/core/error.hpp"

#if HPCTRAIN_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace hpctrain::ddp {

#if HPCTRAIN_WITH_CUDA

namespace {

void check_cuda(cudaError_t status, const char* what) {
  HPCTRAIN_CHECK(status == cudaSuccess, "gradient reducer: {} failed: {}", what, cudaGetErrorString(status));
}

}  // namespace

CopyFence::~CopyFence() {
  if (event_ != nullptr) (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void CopyFence::record(const c10::Device& device) {
  if (!device.is_cuda()) return;
  const c10::cuda::CUDAGuard guard(device);
  if (event_ == nullptr) {
    cudaEvent_t event = nullptr;
    check_cuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    event_ = event;
    device_index_ = device.index();
  }
  HPCTRAIN_CHECK(device.index() == device_index_, "gradient reducer: parameters on cuda:{} and cuda:{}; expected one "
                 "device per rank", device_index_, device.index());
  check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(event_), c10::cuda::getCurrentCUDAStream(device.index()).stream()),
             "cudaEventRecord");
  pending_ = true;
}

void CopyFence::wait() {
  if (!pending_) return;
  check_cuda(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize");
  pending_ = false;
}

void wait_for_queued_work(const c10::Device& device) {
  if (!device.is_cuda()) return;
  check_cuda(cudaStreamSynchronize(c10::cuda::getCurrentCUDAStream(device.index()).stream()), "cudaStreamSynchronize");
}

#else

CopyFence::~CopyFence() = default;

void CopyFence::record(const c10::Device& device) {
  HPCTRAIN_CHECK(!device.is_cuda(), "gradient reducer: a {} parameter in a build without CUDA "
                 "(configure with -DHPCTRAIN_WITH_CUDA=ON against a CUDA LibTorch)", device.str());
}

void CopyFence::wait() {}

void wait_for_queued_work(const c10::Device& device) { CopyFence().record(device); }  // refuses CUDA

#endif

}  // namespace hpctrain::ddp
