// The HDF5 library's version as linked (H5get_libversion; src/data/hdf5_info.cpp, which sees hdf5.h).
#pragma once

#include <string>

namespace hpctrain::data {

// "1.10.8" for the library this process runs, and the header version it was built against.
std::string hdf5_library_version();
std::string hdf5_header_version();

}  // namespace hpctrain::data
