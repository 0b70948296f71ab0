// The progress bar or plain lines (Note [Progress bar under mpirun]): a pure decision on the terminal facts.
#include <boost/test/unit_test.hpp>

#include "train/log/console_sink.hpp"

using hpctrain::train::names_terminal;
using hpctrain::train::show_progress_bar;
using hpctrain::train::TerminalFacts;

BOOST_AUTO_TEST_SUITE(progress_decision)

BOOST_AUTO_TEST_CASE(single_process_follows_its_stdout) {
  BOOST_TEST(show_progress_bar(true, TerminalFacts{true, false, false}));
  BOOST_TEST(!show_progress_bar(true, TerminalFacts{false, false, true}));  // `hpctrain train > log`
  BOOST_TEST(!show_progress_bar(false, TerminalFacts{true, false, false}));  // --no-progress
}

BOOST_AUTO_TEST_CASE(under_mpirun_follows_mpiruns_stdout) {
  // The rank's stdout is Open MPI's pty in every case: mpirun's own stdout decides.
  BOOST_TEST(show_progress_bar(true, TerminalFacts{true, true, true}));    // mpirun -np 2 ... in a terminal
  BOOST_TEST(!show_progress_bar(true, TerminalFacts{true, true, false}));  // mpirun ... | tee, or a batch job
  BOOST_TEST(!show_progress_bar(false, TerminalFacts{true, true, true}));
  BOOST_TEST(!show_progress_bar(true, TerminalFacts{false, true, true}));  // mpirun --output-filename ...
}

BOOST_AUTO_TEST_CASE(terminal_link_targets) {
  BOOST_TEST(names_terminal("/dev/pts/3"));
  BOOST_TEST(names_terminal("/dev/tty1"));
  BOOST_TEST(!names_terminal("pipe:[1710189]"));
  BOOST_TEST(!names_terminal("/var/spool/slurm/job42/slurm_script.out"));
  BOOST_TEST(!names_terminal("/dev/null"));
  BOOST_TEST(!names_terminal("socket:[99]"));
}

BOOST_AUTO_TEST_SUITE_END()
