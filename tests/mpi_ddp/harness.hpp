// A minimal harness for the mpirun -np 2 ddp tests: EXPECT throws with file, line and rank; main.cpp
// ends the whole job on the first failure so no rank waits in a collective.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "hpctrain/dist/comm.hpp"

namespace mpi_test {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#define EXPECT(cond, ...)                                                                                 \
  do {                                                                                                   \
    if (!(cond)) {                                                                                       \
      throw ::mpi_test::Failure(fmt::format("{}:{}: EXPECT({}) failed: {}", __FILE__, __LINE__, #cond,   \
                                            fmt::format(__VA_ARGS__)));                                  \
    }                                                                                                    \
  } while (0)

// The cases, one per ctest entry (see tests.cmake).
void reducer_matches_average(hpctrain::dist::Comm& comm);
void unused_parameters(hpctrain::dist::Comm& comm);
void no_sync_accumulation(hpctrain::dist::Comm& comm);
void late_gradients(hpctrain::dist::Comm& comm);
void broadcast(hpctrain::dist::Comm& comm);
void structure_and_sync_checks(hpctrain::dist::Comm& comm);
void row_sparse_buckets(hpctrain::dist::Comm& comm);
void gradient_views(hpctrain::dist::Comm& comm);
void local_sgd_average(hpctrain::dist::Comm& comm);
void bf16_wire(hpctrain::dist::Comm& comm);
void zero_slices(hpctrain::dist::Comm& comm);

}  // namespace mpi_test
