# scripts/gpu-check.sh (the prepared check for a lent GPU machine): a deliberately failing stage does not stop the
# later ones. A dry run: no GPU, build or packaged prefix needed (label scripts).
add_test(NAME scripts.gpu_check_failing_stage
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/test_failing_stage.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts.gpu_check_failing_stage PROPERTIES LABELS scripts TIMEOUT 120)
