# bench_tokenize: hpctrain's BertTokenizer throughput on a text corpus (run through bench/tokenize/run.sh).
add_executable(bench_tokenize ${CMAKE_CURRENT_LIST_DIR}/bench_tokenize.cpp)
target_link_libraries(bench_tokenize PRIVATE hpctrain_base)
target_compile_options(bench_tokenize PRIVATE ${HPCTRAIN_WARNINGS})
