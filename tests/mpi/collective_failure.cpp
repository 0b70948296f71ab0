// run_collectively under mpirun (Note [Agree on the first failure]): a step that fails on the last rank
// only ends on every rank with that rank's message; a step that succeeds everywhere returns everywhere;
// when several ranks fail, the lowest one's message wins. Exit code 0 only if every rank saw all that.
#include <cstdio>
#include <string>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/collective.hpp"

namespace {

using hpctrain::dist::Comm;

// The message every rank got from run_collectively, or "" when it returned normally.
template <typename Work>
std::string outcome(Comm& comm, Work&& work) {
  try {
    hpctrain::dist::run_collectively(comm, "the step", work);
  } catch (const hpctrain::Error& e) {
    return e.what();
  }
  return "";
}

bool expect(Comm& comm, const std::string& got, const std::string& wanted, const char* what) {
  if (got == wanted) return true;
  std::fprintf(stderr, "rank %d, %s: got '%s', expected '%s'\n", comm.rank(), what, got.c_str(), wanted.c_str());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::dist::MpiRuntime runtime(&argc, &argv);
  Comm& comm = runtime.world();
  const int last = comm.world_size() - 1;
  bool ok = expect(comm, outcome(comm, [] {}), "", "all succeed");
  ok &= expect(comm, outcome(comm, [&] { if (comm.rank() == last) hpctrain::fail("disk full"); }),
               "the step failed on rank " + std::to_string(last) + ": disk full", "last rank fails");
  ok &= expect(comm, outcome(comm, [&] { hpctrain::fail("rank {} broke", comm.rank()); }),
               "the step failed on rank 0: rank 0 broke", "every rank fails");
  const int all_ok = comm.allreduce_value<int32_t>(ok ? 1 : 0, hpctrain::dist::ReduceOp::min);
  if (comm.rank() == 0) std::printf("%s\n", all_ok ? "collective failure agreement: ok" : "FAILED");
  return all_ok ? 0 : 1;
}
