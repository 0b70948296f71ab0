# Note [Precompiled headers]
# Parsing LibTorch's headers is most of the compile time of every translation unit that includes them (about
# 5 s of 7 on the 2-core CI machine), and a cold build compiles some 170 of them three times in CI (Release,
# LibTorch 2, ASan). hpctrain_precompile_torch_headers(target) gives a target one precompiled header of the
# LibTorch, JSON and fmt headers most of its files include; each target builds its own (one more compile per
# target) because their definitions and warning options differ. Only targets with several LibTorch
# translation units take one. The sources still include what they use: a build with
# -DHPCTRAIN_PCH=OFF (or -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON) checks it.
# With ccache (scripts/build.sh), the sloppiness ccache needs for precompiled headers is set on the launcher,
# and GCC gets -fpch-preprocess so that ccache can hash the preprocessed source.
option(HPCTRAIN_PCH "Precompile the LibTorch headers of the LibTorch-heavy targets (Note [Precompiled headers])" ON)

function(hpctrain_precompile_torch_headers target)
  if(NOT HPCTRAIN_PCH)
    return()
  endif()
  target_precompile_headers(${target} PRIVATE
    <ATen/ATen.h> <torch/nn/module.h> <torch/autograd.h> <nlohmann/json.hpp> <fmt/format.h>)
  if(CMAKE_CXX_COMPILER_LAUNCHER MATCHES "ccache" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -fpch-preprocess)
  endif()
endfunction()
