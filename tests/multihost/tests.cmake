# Two "hosts" on one machine (network namespaces + veth, Open MPI over TCP only; netns_lib.sh), label
# multihost: test_two_hosts.sh (one-host == two-host weights) and the network faults (docs/reliability.md).
# Skipped (77) without root or `ip netns` permission.
file(GLOB multihost_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.sh)
foreach(script ${multihost_scripts})
  get_filename_component(name ${script} NAME_WE)
  string(REPLACE "test_" "" name ${name})
  add_test(NAME multihost.${name} COMMAND bash ${script} $<TARGET_FILE:hpctrain> ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(multihost.${name} PROPERTIES LABELS multihost TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()
