#!/usr/bin/env bash
# Configures and builds hpctrain (Release) in ${HPCTRAIN_BUILD_DIR:-build}. Extra arguments go to cmake --build.
# HPCTRAIN_CMAKE_ARGS: extra configure arguments (first configure only), e.g. another LibTorch
# (scripts/setup-torch2.sh sets them), or the sanitizer and fuzzing builds (scripts/sanitize.sh, scripts/fuzz.sh).
# Split on whitespace: values cannot contain spaces.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${HPCTRAIN_BUILD_DIR:-build}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
read -r -d '' -a extra <<<"${HPCTRAIN_CMAKE_ARGS:-}" || true  # every line (scripts/setup-torch2.sh passes two)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$build_dir" "${generator[@]}" "${launcher[@]}" -DCMAKE_BUILD_TYPE=${HPCTRAIN_BUILD_TYPE:-Release} "${extra[@]}"
fi
jobs=${HPCTRAIN_BUILD_JOBS:-$(nproc)}
cmake --build "$build_dir" -j "$jobs" "$@"
