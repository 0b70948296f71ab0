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
# Prints "upstream" for a finding inside HDF5 itself, which hpctrain's calls cannot prevent (docs/fuzzing.md), else
# "ours". The report's stacks (where it crashed, hung or leaked; who allocated and freed the memory) are read from
# the innermost frame on: a stack whose first frame with a known home is in libhdf5 points at HDF5, one whose first
# such frame is in hpctrain's sources (src/, fuzz/) points at us. Upstream only when some stack points at HDF5 and
# none at us; a report without stacks is ours. An input that passes when run again prints "unreproduced" (a
# timeout on a machine busy with other work).
classify() {
  local report
  if report=$("$1" -timeout="$timeout" -rss_limit_mb=2048 "$2" 2>&1); then
    echo unreproduced
    return
  fi
  awk '
    /^ +#[0-9]+ / {
      if ($1 == "#0") decided = 0
      if (decided) next
      if ($0 ~ /libhdf5/) { hdf5 = 1; decided = 1 }
      else if ($0 ~ /\/(src|fuzz)\/[^ ]*\.[ch]pp:[0-9]+/) { ours = 1; decided = 1 }
    }
    END { print (hdf5 && !ours) ? "upstream" : "ours" }' <<<"$report"
}

# One input taking this long is a finding (a hang); so is one needing 2 GB.
timeout=${HPCTRAIN_FUZZ_TIMEOUT:-25}
failed=()
for target in "${targets[@]}"; do
  artifacts="$build_dir/artifacts/$target"
  rm -rf "$artifacts"
  mkdir -p "$build_dir/corpus/$target" "$artifacts"
  dict=()
  [[ -f fuzz/$target.dict ]] && dict=(-dict="fuzz/$target.dict")
  log="$build_dir/$target.log"
  # Fork mode records every crash, timeout and OOM as an artifact and carries on, so one run reports all it finds;
  # each artifact is classified afterwards.
  "$build_dir/fuzz/$target" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" \
    -timeout="$timeout" -rss_limit_mb=2048 "${dict[@]}" -artifact_prefix="$artifacts/" \
    "$build_dir/corpus/$target" "fuzz/corpus/$target" >"$log" 2>&1 || true
  ours=0 upstream=0 unreproduced=0
  for artifact in "$artifacts"/*; do
    [[ -f $artifact ]] || continue
    case $(classify "$build_dir/fuzz/$target" "$artifact") in
      upstream) upstream=$((upstream + 1)); mkdir -p "$artifacts/upstream"; mv "$artifact" "$artifacts/upstream/" ;;
      unreproduced) unreproduced=$((unreproduced + 1)); echo "fuzz.sh: $target: not reproduced: $artifact" ;;
      *) ours=$((ours + 1)); echo "fuzz.sh: $target: FINDING $artifact" ;;
    esac
  done
  [[ $ours -gt 0 ]] && failed+=("$target")
  last=$(grep -E '^#[0-9]+: cov:' "$log" | tail -n 1 || true)
  echo "fuzz.sh: $target, ${seconds} s: ${last:-no progress line} | findings: $ours ours, $upstream in HDF5 itself, $unreproduced not reproduced"
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz.sh: FINDINGS in ${failed[*]}: reproduce with $build_dir/fuzz/TARGET FILE (inputs in $build_dir/artifacts/)" >&2
  exit 1
fi
echo "fuzz.sh: no findings in hpctrain"
