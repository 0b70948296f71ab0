# Sourced by the benchmark scripts: print_machine prints the CPU model, cores, the CPU features the figures
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
