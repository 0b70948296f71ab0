# Two "hosts" on one machine (network namespaces + veth, Open MPI over TCP only), label multihost.
# Skipped (77) without root or `ip netns` permission.
add_test(NAME multihost.two_hosts COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_two_hosts.sh $<TARGET_FILE:hpctrain>
  ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
set_tests_properties(multihost.two_hosts PROPERTIES LABELS multihost TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
