// Requests to stop training early: SIGTERM, SIGINT and SIGUSR1 set a process-wide flag (the handler does
// nothing else: async-signal-safe); the trainer reads it once per step and the ranks agree on it
// (Note [Stop agreement], src/train/trainer.cpp). A second signal ends the process at once with 128 + signo.
#pragma once

#include <cstdint>
#include <string>

namespace hpctrain::core {

// Exit code of a run that stopped early with a complete checkpoint (EX_TEMPFAIL from sysexits.h):
// "resume with --resume auto". jobs/*.sbatch requeue on it.
inline constexpr int kStoppedEarlyExitCode = 75;

// Installs the handlers for SIGTERM, SIGINT and SIGUSR1 (`hpctrain train` only) and clears the flag.
void install_stop_handlers();
// The signal number of the first stop request since install/reset, 0 when none (async-signal-safe to read).
[[nodiscard]] int stop_signal();
// Records a stop request as if `signo` had arrived (the handler's first-signal path; also for tests).
void request_stop(int signo);
// Clears the flag (tests).
void reset_stop_request();
// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
[[nodiscard]] std::string signal_name(int signo);

// Why a rank asks to stop, folded into one number so that a max-allreduce agrees on it: a signal beats
// the time limit, a lower rank beats a higher one for the same reason. 0 = no request.
struct StopReason {
  int signo = 0;            // > 0: this signal arrived
  bool time_limit = false;  // --max-time or the job's end time is near
  int rank = 0;             // the rank that asked
  [[nodiscard]] bool any() const { return signo > 0 || time_limit; }
};
[[nodiscard]] double encode_stop_reason(const StopReason& reason);
[[nodiscard]] StopReason decode_stop_reason(double code);
// "SIGTERM on rank 1" / "the time limit (rank 0)".
[[nodiscard]] std::string describe(const StopReason& reason);

}  // namespace hpctrain::core
