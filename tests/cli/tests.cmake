# Each tests/cli/test_*.sh runs the real hpctrain binary (args: binary, repo root).
file(GLOB cli_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_*.sh)
foreach(script ${cli_scripts})
  hpctrain_cli_test(${script})
endforeach()
# cli.test_readme needs Debian's fortunes (the README's corpus); without them it says SKIP.
set_tests_properties(cli.test_readme PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: ")
