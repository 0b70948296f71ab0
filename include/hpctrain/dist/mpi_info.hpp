// What `hpctrain env` reports about the MPI library (defined in src/dist/mpi_comm.cpp, the file that sees mpi.h).
#pragma once

#include <string>

namespace hpctrain::dist {

struct MpiLibraryInfo {
  std::string library;        // MPI_Get_library_version, first line (e.g. "Open MPI v4.1.4, ...")
  int standard_major = 0;     // MPI_Get_version: the standard the library implements
  int standard_minor = 0;
  bool cuda_aware_compiled = false;  // MPIX_CUDA_AWARE_SUPPORT (Open MPI's mpi-ext.h) at build time
  bool cuda_aware_runtime = false;   // MPIX_Query_cuda_support() == 1: what Comm::accepts(cuda) answers
};

// Callable before MPI_Init and after (both calls are allowed there by the standard).
MpiLibraryInfo mpi_library_info();

}  // namespace hpctrain::dist
