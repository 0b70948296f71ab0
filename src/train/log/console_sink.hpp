// Private to src/train: whether rank 0 draws a progress bar or prints plain lines (console_sink.cpp).
#pragma once

#include <string>

namespace hpctrain::train {

// Note [Progress bar under mpirun]
// Open MPI gives every local rank a pty as stdout (and a pipe as stderr), whether mpirun's own stdout is a
// terminal, a pipe or a batch job's file; so a rank's isatty() says nothing, and the old check on stderr
// was false under any mpirun. Under mpirun the bar follows mpirun's stdout (the rank's parent process),
// which is where rank 0's stdout ends up. The bar is drawn on stdout, the stream of the info lines.
struct TerminalFacts {
  bool stdout_is_terminal = false;           // this process's stdout
  bool under_mpirun = false;                 // started by Open MPI's mpirun (OMPI_COMM_WORLD_SIZE is set)
  bool launcher_stdout_is_terminal = false;  // the parent process's stdout, e.g. /dev/pts/3 (not a pipe or file)
};

[[nodiscard]] TerminalFacts terminal_facts();
// `enabled`: not --no-progress.
[[nodiscard]] bool show_progress_bar(bool enabled, const TerminalFacts& facts);
// A /proc/PID/fd/N link target that names a terminal ("/dev/pts/3", "/dev/tty1"), not "pipe:[123]" or a file.
[[nodiscard]] bool names_terminal(const std::string& link_target);

}  // namespace hpctrain::train
