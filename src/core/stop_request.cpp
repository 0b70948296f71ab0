// The stop-request flag and its signal handlers (stop_request.hpp), and the encoding of a stop reason.
#include "hpctrain/core/stop_request.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace hpctrain::core {
namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGUSR1};
constexpr double kRankSlots = 1 << 24;  // ranks per reason in encode_stop_reason
constexpr int kTimeLimitReason = 1, kSignalReasonBase = 2;

// mpirun told to end the job (SIGTERM or SIGINT to mpirun) stops reading the ranks' output before it signals
// them: a rank then blocks for good writing a progress line into the full pipe or pty, and never saves
// (measured with Open MPI 4.1: stdout is its pty, stderr a pipe). After a stop request, writes to a pipe or
// socket on stdout/stderr, and to a terminal when Open MPI launched us (its pty, not the user's), fail
// instead of blocking (fstat and fcntl are async-signal-safe).
bool g_output_tty_is_launchers = false;  // set by install_stop_handlers (getenv is not async-signal-safe)

void stop_blocking_on_output() {
  for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat info {};
    if (::fstat(fd, &info) != 0) continue;
    const bool pipe = S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode);
    if (!pipe && !(S_ISCHR(info.st_mode) && g_output_tty_is_launchers)) continue;
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}

// The first signal only sets the flag; a second one (of any of the three) exits now: no checkpoint,
// no destructors, no MPI_Finalize (write and _exit are async-signal-safe).
void on_stop_signal(int signo) {
  int expected = 0;
  if (g_stop_signal.compare_exchange_strong(expected, signo)) {
    stop_blocking_on_output();
    return;
  }
  constexpr char kMessage[] = "hpctrain: second stop signal: exiting now without a checkpoint\n";
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(128 + signo);
}

}  // namespace

void install_stop_handlers() {
  reset_stop_request();
  g_output_tty_is_launchers = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
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
