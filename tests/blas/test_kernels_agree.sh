# The kernels fix_blas_kernels picks give the generic ones' GEMM results within fp32 rounding: at::mm in two
# processes, OPENBLAS_CORETYPE=Prescott and the CPU's kernels (SkylakeX with AVX-512, else Haswell).
set -uo pipefail
DUMP=${1:?gemm_dump binary}
WORK=$(mktemp -d /tmp/hpctrain-blas.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fast=Haswell
grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && fast=SkylakeX
grep -qw avx2 /proc/cpuinfo || { echo "no AVX2: nothing to compare (skipped)"; exit 0; }
OPENBLAS_CORETYPE=Prescott "$DUMP" "$WORK/generic.f32" | tee "$WORK/generic.txt" || exit 1
OPENBLAS_CORETYPE=$fast "$DUMP" "$WORK/fast.f32" | tee "$WORK/fast.txt" || exit 1
grep -q "not OpenBLAS" "$WORK/generic.txt" && { echo "the BLAS is not OpenBLAS (skipped)"; exit 0; }
grep -qi "prescott" "$WORK/generic.txt" || { echo "FAILED: OPENBLAS_CORETYPE=Prescott was not used"; exit 1; }
grep -qi "$fast" "$WORK/fast.txt" || { echo "FAILED: OPENBLAS_CORETYPE=$fast was not used"; exit 1; }
/usr/bin/python3 - "$WORK/generic.f32" "$WORK/fast.f32" <<'PYEOF'
import sys
import numpy as np
a, b = (np.fromfile(p, dtype=np.float32).astype(np.float64) for p in sys.argv[1:])
# 320-term dot products of N(0,1) values: fp32 rounding of sums whose terms reach |x| ~ 20 is ~ 1e-5 absolute.
diff = np.abs(a - b).max()
print(f"max |generic - fast| = {diff:.3g} (max |c| = {np.abs(a).max():.3g}); identical elements: {np.mean(a == b):.3f}")
sys.exit(0 if a.shape == b.shape and a.size == 256 * 192 and diff <= 1e-4 and not np.array_equal(a, 0 * a) else 1)
PYEOF
