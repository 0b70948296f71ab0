// How the process's C heap serves tensor memory on the host.
#pragma once

namespace hpctrain::core {

// Note [Host allocator]
// LibTorch allocates CPU tensors with posix_memalign, i.e. glibc malloc. With glibc's defaults a training
// step's large buffers (activations, the [vocab, dim] embedding gradient) are mmap'ed fresh and
// page-faulted in every step, and the heap is trimmed back to the OS when the step's memory is freed:
// measured on the DistilBERT benchmark model (bench/models/run.sh), 1.05 s per step against 0.60 s for
// PyTorch from Python, whose long-lived objects happen to keep the heap from being trimmed. This keeps
// freed memory in the heap for the next step (what a caching allocator does): mmap only above 1 GiB,
// trim only above 1 GiB of free top-of-heap. Resident memory stays at the step's peak. Skipped when the
// user set MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ (glibc's own tuning variables) or
// HPCTRAIN_MALLOC_TUNING=0; a no-op on other C libraries. Idempotent; call it before the first tensor.
void tune_host_allocator();

// While alive, undoes the tuning above (glibc's defaults: buffers over 128 KiB mmap'ed, freed memory returned),
// so that the resident set follows the live tensors: `estimate-memory --measure` compares it with arithmetic
// that counts tensors, not where the heap happens to place them (with the tuning, the same step measured from
// 10 % below to 40 % above its live peak, by the optimizer's or the model's allocation order alone). Restores the tuning at the end; a no-op
// where the tuning is not in effect.
// Returns the heap's free pages to the OS now (glibc's malloc_trim(0), which also releases free pages inside the
// heap, not only at its top), whatever the thresholds above say: for a one-off drop of many large tensors the next
// step will not reuse, e.g. the float32 weights a 4-bit base replaced (Note [Quantized base]). A no-op elsewhere.
void release_free_heap_memory();

class LiveTensorResidency {
 public:
  LiveTensorResidency();
  ~LiveTensorResidency();
  LiveTensorResidency(const LiveTensorResidency&) = delete;
  LiveTensorResidency& operator=(const LiveTensorResidency&) = delete;

 private:
  bool active_ = false;
};

}  // namespace hpctrain::core
