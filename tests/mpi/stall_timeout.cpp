// The collective watchdog (Note [Collective timeout]) under mpirun -np 2, driven by test_stall_timeout.sh.
//   stall: with a 3 s timeout, rank 1 sleeps 60 s outside any collective before the second one; the job
//          must end within seconds with the watchdog's message (returning from the allreduce is a failure).
//   quick: ranks take turns arriving 0.3 s late at collectives on the world and on a duplicate under a
//          1 s timeout: nothing fires, and the program ends cleanly (the watchdog stops before MPI_Finalize).
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "hpctrain/dist/comm.hpp"

int main(int argc, char** argv) {
  hpctrain::dist::MpiRuntime runtime(&argc, &argv);
  hpctrain::dist::Comm& comm = runtime.world();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "stall" && mode != "quick") {
    std::fprintf(stderr, "usage: mpi_stall_timeout stall|quick\n");
    return 2;
  }
  comm.set_collective_timeout(mode == "stall" ? 3 : 1);
  comm.barrier();  // collective #1
  if (mode == "stall") {
    if (comm.rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    (void)comm.allreduce_value<int64_t>(1);  // collective #2: rank 0 waits here
    std::printf("FAILED: rank %d returned from the allreduce after the stall\n", comm.rank());
    return 1;
  }
  const auto duplicate = comm.duplicate();
  for (int i = 0; i < 8; ++i) {
    if (comm.rank() == i % comm.world_size()) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    hpctrain::dist::Comm& target = i % 2 == 0 ? comm : *duplicate;
    const int64_t sum = target.allreduce_value<int64_t>(1);
    if (sum != comm.world_size()) {
      std::printf("FAILED: allreduce gave %lld\n", static_cast<long long>(sum));
      return 1;
    }
  }
  if (comm.rank() == 0) std::printf("quick collectives under a 1 s timeout: ok\n");
  return 0;
}
