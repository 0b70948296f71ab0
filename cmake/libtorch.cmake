# Checks and settings for the LibTorch that find_package(Torch) found: Debian's 1.13 (the default) or
# LibTorch 2.x from the `torch` wheel (scripts/setup-torch2.sh). Included right after find_package(Torch).

# A wheel's TorchConfig.cmake finds libtorch.so with default search paths first: on a machine that also
# has Debian's libtorch-dev, headers of one version would be linked against the other's libraries.
get_filename_component(hpctrain_torch_lib_dir "${TORCH_LIBRARY}" DIRECTORY)
get_filename_component(hpctrain_torch_lib_dir "${hpctrain_torch_lib_dir}" REALPATH)
get_filename_component(hpctrain_torch_prefix "${TORCH_INSTALL_PREFIX}" REALPATH)
string(FIND "${hpctrain_torch_lib_dir}" "${hpctrain_torch_prefix}" hpctrain_torch_at)
if(NOT hpctrain_torch_at EQUAL 0)
  message(FATAL_ERROR "LibTorch's CMake files are in ${TORCH_INSTALL_PREFIX} but libtorch was found as "
    "${TORCH_LIBRARY}.\n  hint: put the LibTorch folder itself first in CMAKE_PREFIX_PATH "
    "(scripts/setup-torch2.sh does)")
endif()

# Note [fmt beside LibTorch 2.x]
# The torch wheel's include folder carries its own fmt headers (fmt 12 in torch 2.15), found before
# Debian's fmt 9 in /usr/include by every target that sees LibTorch's headers, and libtorch exports no fmt
# symbols. Those targets therefore use fmt header-only; the torch-free hpctrain_base keeps Debian's libfmt.
# fmt's versioned inline namespace (fmt::v9, fmt::v12) keeps the two apart at link time, and no function
# of hpctrain's headers takes an fmt type except as a template.
set(HPCTRAIN_TORCH_DEFINITIONS "")
get_target_property(hpctrain_fmt_include fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
get_filename_component(hpctrain_fmt_include "${hpctrain_fmt_include}" REALPATH)
get_filename_component(hpctrain_torch_include "${TORCH_INSTALL_PREFIX}/include" REALPATH)
if(EXISTS "${hpctrain_torch_include}/fmt/format.h" AND NOT hpctrain_torch_include STREQUAL hpctrain_fmt_include)
  list(APPEND HPCTRAIN_TORCH_DEFINITIONS FMT_HEADER_ONLY=1)
  message(STATUS "LibTorch bundles fmt: targets that see LibTorch use it header-only")
endif()

# The wheel's libtorch_cuda.so finds its CUDA libraries (pip's nvidia-* packages) through its RPATH
# ($ORIGIN/../../nvidia/*/lib) at run time; the linker does not expand $ORIGIN and would otherwise resolve
# them from ld.so.cache (e.g. an older NCCL of a system CUDA toolkit) and fail on missing symbols.
set(HPCTRAIN_TORCH_LINK_OPTIONS "")
file(GLOB hpctrain_nvidia_lib_dirs LIST_DIRECTORIES true "${TORCH_INSTALL_PREFIX}/../nvidia/*/lib")
foreach(dir ${hpctrain_nvidia_lib_dirs})
  list(APPEND HPCTRAIN_TORCH_LINK_OPTIONS "LINKER:-rpath-link,${dir}")
endforeach()
