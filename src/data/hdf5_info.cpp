// hdf5_info.hpp: the HDF5 version, linked and compiled against.
#include "hpctrain/data/hdf5_info.hpp"

#include <fmt/format.h>
#include <hdf5.h>

namespace hpctrain::data {

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  if (H5get_libversion(&major, &minor, &release) < 0) return "unknown (H5get_libversion failed)";
  return fmt::format("{}.{}.{}", major, minor, release);
}

std::string hdf5_header_version() { return fmt::format("{}.{}.{}", H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE); }

}  // namespace hpctrain::data
