# mpirun -np 2 training tests. Bash scenarios (train, interrupt, resume, compare) drive the real
# hpctrain binary: `bash test_x.sh HPCTRAIN REPO MPIEXEC`; unused_parameters.cpp runs the Accelerator.
file(GLOB train_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.sh)
foreach(script ${train_scripts})
  get_filename_component(name ${script} NAME_WE)
  string(REPLACE "test_" "" name ${name})
  add_test(NAME mpi.train.${name} COMMAND bash ${script} $<TARGET_FILE:hpctrain> ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(mpi.train.${name} PROPERTIES LABELS mpi TIMEOUT 600
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
endforeach()

add_executable(mpi_train_unused ${CMAKE_CURRENT_LIST_DIR}/unused_parameters.cpp)
target_link_libraries(mpi_train_unused PRIVATE hpctrain_torch)
target_compile_options(mpi_train_unused PRIVATE ${HPCTRAIN_WARNINGS})
hpctrain_mpi_test(train.unused_parameters 2 $<TARGET_FILE:mpi_train_unused>)

# optimizer_state_bytes (Note [Optimizer state bytes]): the max over ranks of optimizers of different sizes.
add_executable(mpi_train_optimizer_state_max ${CMAKE_CURRENT_LIST_DIR}/optimizer_state_max.cpp)
target_link_libraries(mpi_train_optimizer_state_max PRIVATE hpctrain_torch)
target_compile_options(mpi_train_optimizer_state_max PRIVATE ${HPCTRAIN_WARNINGS})
hpctrain_mpi_test(train.optimizer_state_max 2 $<TARGET_FILE:mpi_train_optimizer_state_max>)

# mpi.train.lora_peft needs a python with peft (HPCTRAIN_TRANSFORMERS_PYTHON); without one it says SKIP.
set_tests_properties(mpi.train.lora_peft PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: ")
# mpi.train.qlora_peft needs a python with peft and bitsandbytes (HPCTRAIN_TRANSFORMERS_PYTHON); without one it says SKIP.
set_tests_properties(mpi.train.qlora_peft PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: ")

# chunked_loss_gradients (Note [Chunked loss]): the chunked loss's averaged gradients equal the unchunked ones on 2 ranks.
add_executable(mpi_train_chunked_loss_gradients ${CMAKE_CURRENT_LIST_DIR}/chunked_loss_gradients.cpp)
target_link_libraries(mpi_train_chunked_loss_gradients PRIVATE hpctrain_torch)
target_compile_options(mpi_train_chunked_loss_gradients PRIVATE ${HPCTRAIN_WARNINGS})
hpctrain_mpi_test(train.chunked_loss_gradients 2 $<TARGET_FILE:mpi_train_chunked_loss_gradients> ${PROJECT_SOURCE_DIR}/tests/models/golden)
