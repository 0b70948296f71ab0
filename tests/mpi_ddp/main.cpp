// mpirun -np 2 mpi_ddp_test <case>: runs one case on every rank. A failed EXPECT or exception ends the
// job with MPI_Abort, and a watchdog ends a hung case after kWatchdogSeconds, long before ctest's timeout.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include <ATen/Parallel.h>

#include "harness.hpp"

namespace {

constexpr int kWatchdogSeconds = 90;

struct Case {
  const char* name;
  void (*run)(hpctrain::dist::Comm&);
};

constexpr Case kCases[] = {
    {"reducer", mpi_test::reducer_matches_average}, {"unused", mpi_test::unused_parameters},
    {"no_sync", mpi_test::no_sync_accumulation},     {"late", mpi_test::late_gradients},
    {"broadcast", mpi_test::broadcast},              {"structure", mpi_test::structure_and_sync_checks},
    {"row_sparse", mpi_test::row_sparse_buckets},    {"grad_views", mpi_test::gradient_views},
    {"local_sgd", mpi_test::local_sgd_average},      {"bf16_wire", mpi_test::bf16_wire},
    {"zero", mpi_test::zero_slices},
};

void start_watchdog(int rank, const char* name) {
  std::thread([rank, name] {
    std::this_thread::sleep_for(std::chrono::seconds(kWatchdogSeconds));
    std::fprintf(stderr, "[rank %d] case '%s' still running after %d s: a collective hangs; ending the job\n", rank,
                 name, kWatchdogSeconds);
    std::fflush(stderr);
    std::_Exit(124);  // mpirun ends the other ranks when one exits without MPI_Finalize
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  hpctrain::dist::MpiRuntime runtime(&argc, &argv);
  hpctrain::dist::Comm& comm = runtime.world();
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpirun -np 2 %s <case>\n", argv[0]);
    return 2;
  }
  const Case* selected = nullptr;
  for (const Case& test_case : kCases) {
    if (std::strcmp(test_case.name, argv[1]) == 0) selected = &test_case;
  }
  if (selected == nullptr) {
    std::fprintf(stderr, "unknown case '%s'\n", argv[1]);
    return 2;
  }
  at::set_num_threads(1);  // two ranks share two cores
  start_watchdog(comm.rank(), selected->name);
  try {
    if (comm.world_size() != 2) throw mpi_test::Failure("run with mpirun -np 2");
    selected->run(comm);
    comm.barrier();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "[rank %d] case '%s' FAILED: %s\n", comm.rank(), selected->name, error.what());
    std::fflush(stderr);
    comm.abort(1);
  }
  std::printf("[rank %d] case '%s' passed\n", comm.rank(), selected->name);
  return 0;
}
