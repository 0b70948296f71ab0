# Sourced by the benchmark scripts. bench_workspace sets up a run: the binary, a work folder, the results file, the
# machine printed. print_machine prints the CPU model, cores, the CPU features the figures
# depend on (avx2, avx512f, avx512_bf16, amx_bf16), the BLAS core override and the load average, so that every
# result names the machine it was measured on (a target needing a missing feature is not measurable there).
print_machine() {
  local model flags wanted feature
  model=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | xargs)
  flags=$(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)
  wanted=""
  for feature in avx2 avx512f avx512_bf16 amx_bf16; do
    if [[ " $flags " == *" $feature "* ]]; then wanted+=" $feature"; else wanted+=" (no $feature)"; fi
  done
  echo "cpu: $model, $(nproc) cores;$wanted"
  echo "blas: OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} (hpctrain re-execs with a better core where OpenBLAS picks generic kernels: Note [BLAS kernels]); load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_workspace NAME BUILD_DIR: hpctrain=BUILD_DIR/hpctrain (exits naming the build command when it is missing), a
# work folder work=/tmp/bench-NAME.XXXXXX removed at exit, results=$RESULTS (kept, appended to) or a file in it, and
# print_machine.
bench_workspace() {
  hpctrain=$2/hpctrain
  [[ -x $hpctrain ]] || { echo "error: $hpctrain not found; build it: scripts/build.sh --target hpctrain" >&2; exit 1; }
  work=$(mktemp -d "/tmp/bench-$1.XXXXXX")
  results=${RESULTS:-$work/results.jsonl}
  trap 'rm -rf "$work"' EXIT
  print_machine
}
