// The peak a rank's matrix products reach on this machine: the denominator of MFU (Note [Model FLOPs] in
// models/model_flops.hpp). Measured, not taken from a data sheet: a CPU's peak depends on its vector units,
// its threads and what else runs, and llm.c's GPU figures use the data sheet only because a GPU's is reached.
//
// Note [MFU never above 100 %]
// MFU is the model's training FLOP/s over the peak. A peak measured once at start-up on a loaded machine can fall
// below what training reaches once the load drops (MFU 120 % was shown), so two rules keep every MFU shown <= 100 %:
//  - measure_peak_flops takes the best rate of several short rounds at two sizes (512 and 1024; the largest a
//    start-up can afford on a CPU), the closest a quick measurement comes to an upper bound;
//  - MfuPeak is the running denominator: when a logged window runs faster than a measured peak, the machine has
//    shown it can, so the peak becomes that rate (MFU 100 % for the window; the log says so once, and the
//    metrics.jsonl line carries "mfu_peak_raised": true). A --peak-tflops peak is the user's figure and stays: the
//    window's MFU is shown as 100 % and its line carries "mfu_clamped": true (the log says once that the figure is
//    below the rate reached).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace hpctrain::train {

// FLOP/s of square `dtype` matrix products on `device` with the current intra-op threads: one warm-up product per
// size, then for each of the sizes 512 and `size` `rounds` rounds of products for about `seconds` / (2 rounds) each,
// the best rate of all rounds.
[[nodiscard]] double measure_peak_flops(at::Device device, c10::ScalarType dtype, int64_t size = 1024,
                                        double seconds = 0.3, int rounds = 4);

// The MFU denominator over a run (Note [MFU never above 100 %]).
class MfuPeak {
 public:
  // peak_flops: FLOP/s of everything the achieved rates count (every rank's peak, summed); measured: from
  // measure_peak_flops (raised when exceeded) rather than --peak-tflops (kept, the MFU clamped).
  MfuPeak(double peak_flops, bool measured) : peak_(peak_flops), measured_(measured) {}

  struct Reading {
    double mfu = 0;            // in [0, 1]
    bool peak_raised = false;  // a measured peak was below this rate and is now this rate
    bool clamped = false;      // a --peak-tflops peak was below this rate: mfu shown as 1
    std::string note;          // a line for the log, the first time either happens ("" otherwise)
  };
  // The MFU of a window that ran at `flops_per_second`.
  [[nodiscard]] Reading read(double flops_per_second);
  [[nodiscard]] double peak() const { return peak_; }

 private:
  double peak_;
  bool measured_;
  bool noted_ = false;
};

}  // namespace hpctrain::train
