# bench_fused_product: the 4-bit base's products alone, fused against dequantize-then-multiply (bench/README.md,
# "QLoRA"); run.sh benchmarks whole QLoRA steps against transformers + peft + bitsandbytes.
add_executable(bench_fused_product ${CMAKE_CURRENT_LIST_DIR}/bench_fused_product.cpp)
target_link_libraries(bench_fused_product PRIVATE hpctrain_torch)
target_include_directories(bench_fused_product PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(bench_fused_product PRIVATE ${HPCTRAIN_WARNINGS})
