# jobs/*.sbatch: a syntax check without a cluster (label jobs), and tests on a real one-node Slurm
# (label slurm) that scripts/slurm-local.sh starts as the ctest fixture `slurm` and stops after them.
# Without root or the Slurm packages every slurm test is skipped (exit 77) with the command that gets them.
add_test(NAME jobs.check COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/check_jobs.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(jobs.check PROPERTIES LABELS jobs TIMEOUT 60)

# 4 CPUs advertised on any machine (config_overrides) so that 2 ranks x 2 threads fit in one allocation.
set(HPCTRAIN_SLURM_ENV "SLURM_LOCAL_CPUS=4;SLURM_CONF=/var/spool/slurm-local/slurm.conf"
  "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1")
add_test(NAME slurm.up COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm-local.sh up)
add_test(NAME slurm.down COMMAND ${PROJECT_SOURCE_DIR}/scripts/slurm-local.sh down)
set_tests_properties(slurm.up PROPERTIES FIXTURES_SETUP slurm)
set_tests_properties(slurm.down PROPERTIES FIXTURES_CLEANUP slurm)
set(slurm_tests slurm.up slurm.down)

file(GLOB slurm_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.sh)
foreach(script ${slurm_scripts})
  get_filename_component(name ${script} NAME_WE)
  string(REPLACE "test_" "" name ${name})
  add_test(NAME slurm.${name} COMMAND bash ${script} $<TARGET_FILE:hpctrain> ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(slurm.${name} PROPERTIES FIXTURES_REQUIRED slurm RESOURCE_LOCK slurm TIMEOUT 120)
  list(APPEND slurm_tests slurm.${name})
endforeach()
set_tests_properties(${slurm_tests} PROPERTIES LABELS slurm SKIP_RETURN_CODE 77 ENVIRONMENT "${HPCTRAIN_SLURM_ENV}")
