#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, no LibTorch) in ${HPCTRAIN_FUZZ_DIR:-build-fuzz} and runs each
# for SECONDS (default 20: the CI run; `scripts/fuzz.sh 600` for a long run) on its corpus fuzz/corpus/<target>/.
# New inputs go to build-fuzz/corpus/<target>/, crashes to build-fuzz/artifacts/<target>/ (those inside HDF5 itself to
# .../upstream/). Exit status 1 when any target found something in hpctrain. Usage: scripts/fuzz.sh [SECONDS] [TARGET...]; docs/fuzzing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
build_dir=${HPCTRAIN_FUZZ_DIR:-build-fuzz}
scripts/install-deps.sh fuzz
clang=${HPCTRAIN_FUZZ_CXX:-clang++-14}
start=$SECONDS
HPCTRAIN_BUILD_DIR=$build_dir HPCTRAIN_BUILD_TYPE=RelWithDebInfo HPCTRAIN_CMAKE_ARGS="-DCMAKE_C_COMPILER=${clang/++/} \
  -DCMAKE_CXX_COMPILER=$clang -DHPCTRAIN_BUILD_FUZZERS=ON" scripts/build.sh
echo "fuzz.sh: build took $((SECONDS - start)) s"

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for source in fuzz/fuzz_*.cpp; do targets+=("$(basename "$source" .cpp)"); done
fi
# Prints "upstream" for a finding inside HDF5 itself, which hpctrain's calls cannot prevent (docs/fuzzing.md): a
# wild read (SEGV), a hang or an allocation without bound whose innermost known frame is in the uninstrumented
# libhdf5 rather than in hpctrain's code. Every other report (ASan in an instrumented frame or an interceptor such
# as memcpy into one of our buffers, UBSan, a broken invariant, an uncaught exception) prints "ours".
classify() {
  local report kind first
  report=$("$1" -timeout=10 -rss_limit_mb=2048 "$2" 2>&1 || true)
  kind=$(grep -m1 -oE 'ERROR: (AddressSanitizer: [a-z-]+|libFuzzer: [a-z-]+)' <<<"$report" || true)
  case "$kind" in
    *SEGV | *unknown-crash | *timeout | *out-of-memory) ;;
    *) echo ours; return ;;
  esac
  first=$(grep -E '^ +#[0-9]+ ' <<<"$report" | grep -m1 -oE 'libhdf5|/(src|fuzz)/[^ ]*\.[ch]pp:[0-9]+' || true)
  [[ $first == libhdf5 ]] && echo upstream || echo ours
}

failed=()
for target in "${targets[@]}"; do
  artifacts="$build_dir/artifacts/$target"
  rm -rf "$artifacts"
  mkdir -p "$build_dir/corpus/$target" "$artifacts"
  dict=()
  [[ -f fuzz/$target.dict ]] && dict=(-dict="fuzz/$target.dict")
  log="$build_dir/$target.log"
  # Fork mode records every crash, timeout (one input taking 10 s) and OOM (an input needing 2 GB) as an artifact
  # and carries on, so one run reports all it finds; each artifact is classified afterwards.
  "$build_dir/fuzz/$target" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$artifacts/" \
    "$build_dir/corpus/$target" "fuzz/corpus/$target" >"$log" 2>&1 || true
  ours=0 upstream=0
  for artifact in "$artifacts"/*; do
    [[ -f $artifact ]] || continue
    if [[ $(classify "$build_dir/fuzz/$target" "$artifact") == upstream ]]; then
      upstream=$((upstream + 1))
      mkdir -p "$artifacts/upstream" && mv "$artifact" "$artifacts/upstream/"
    else
      ours=$((ours + 1))
      echo "fuzz.sh: $target: FINDING $artifact"
    fi
  done
  [[ $ours -gt 0 ]] && failed+=("$target")
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
  echo "fuzz.sh: $target, ${seconds} s: ${last:-no progress line} | findings: $ours ours, $upstream in HDF5 itself"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: FINDINGS in ${failed[*]}: reproduce with $build_dir/fuzz/TARGET FILE (inputs in $build_dir/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: no findings in hpctrain"
