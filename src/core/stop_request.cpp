// The stop-request flag and its signal handlers (stop_request.hpp), and the encoding of a stop reason.
#include "hpctrain/core/stop_request.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>

namespace hpctrain::core {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};
constexpr double kRankSlots = 1 << 24;  // ranks per reason in encode_stop_reason
constexpr int kTimeLimitReason = 1, kSignalReasonBase = 2;

// The first signal only sets the flag; a second one (of any of the three) exits now: no checkpoint,
// no destructors, no MPI_Finalize (write and _exit are async-signal-safe).
void on_stop_signal(int signo) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, signo)) return;
  constexpr char kMessage[] = "hpctrain: second stop signal: exiting now without a checkpoint\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(128 + signo);
}

}  // namespace

void install_stop_handlers() {
  reset_stop_request();
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking calls (MPI, file I/O) continue; the loop reads the flag
  for (const int signo : kStopSignals) ::sigaction(signo, &action, nullptr);
}

int stop_signal() { return g_stop_signal.load(); }

void request_stop(int signo) { on_stop_signal(signo); }

void reset_stop_request() { g_stop_signal.store(0); }

std::string signal_name(int signo) {
  switch (signo) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    default: return fmt::format("signal {}", signo);
  }
}

double encode_stop_reason(const StopReason& reason) {
  if (!reason.any()) return 0;
  const int kind = reason.signo > 0 ? kSignalReasonBase + reason.signo : kTimeLimitReason;
  return kind * kRankSlots + (kRankSlots - 1 - reason.rank);
}

StopReason decode_stop_reason(double code) {
  StopReason reason;
  if (code <= 0) return reason;
  const auto kind = static_cast<int>(code / kRankSlots);
  reason.rank = static_cast<int>(kRankSlots - 1 - (code - kind * kRankSlots));
  if (kind == kTimeLimitReason) reason.time_limit = true;
  else reason.signo = kind - kSignalReasonBase;
  return reason;
}

std::string describe(const StopReason& reason) {
  if (reason.signo > 0) return fmt::format("{} on rank {}", signal_name(reason.signo), reason.rank);
  if (reason.time_limit) return fmt::format("the time limit (rank {})", reason.rank);
  return "no stop request";
}

}  // namespace hpctrain::core
