# HDF5 dataset file: size and read speed with and without gzip (numbers in docs/hdf5-format.md).
add_executable(bench_hdf5_compression ${CMAKE_CURRENT_LIST_DIR}/hdf5_compression.cpp)
target_link_libraries(bench_hdf5_compression PRIVATE hpctrain_base)
target_compile_options(bench_hdf5_compression PRIVATE ${HPCTRAIN_WARNINGS})
