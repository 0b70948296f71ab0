#!/usr/bin/env bash
# The prepared check for a lent GPU machine (issue 22): one H200 for 15 minutes in all, bare (python3 with torch,
# cmake, ninja, nvcc; no MPI, HDF5, Boost; no network), each command at most 10 minutes. One verb per device
# command, each well under that limit; README "Checking on a lent GPU" gives the exact calls.
#   scripts/gpu-check.sh prepare              here: the Debian packages' files in a prefix, its library closure
#                                             checked, packed into .gpu-deps/prefix.tar.gz (carry it)
#   scripts/gpu-check.sh preflight [OUT_DIR]  there, < 30 s: versions, C++ ABI, libraries, numpy/h5py, ssh, mpirun
#   scripts/gpu-check.sh build [OUT_DIR]      there: only the targets the check runs, ninja -k 0, the whole log
#   scripts/gpu-check.sh check [OUT_DIR]      there: the stages (equivalence, training runs, throughput, MFU,
#                                             memory), each with its own status, time and log; a summary table
#   scripts/gpu-check.sh rehearse [OUT_DIR]   here: preflight + build + check against the prefix alone, --device cpu
# A failing stage never stops the later ones; every verb exits non-zero when anything failed. OUT_DIR (default
# .gpu-deps/out) receives from each device verb at most 4 files (the device tool returns 8, 2 folders deep):
# preflight.txt; build.log; check-summary.txt, check-results.jsonl, check-logs.tar.gz (and build.log when check
# had to build); rehearse adds loader.txt and rehearse.txt.
# Environment: PYTHON (the interpreter with torch, default python3), HPCTRAIN_GPU_DEVICE (cuda; rehearse: cpu),
# HPCTRAIN_GPU_BUILD_DIR (build-gpu), JOBS (build jobs, default nproc), HPCTRAIN_GPU_CHECK_STAGES (an extended
# regex: only the stages it matches run), HPCTRAIN_GPU_CHECK_FAIL (a stage name: it fails on purpose, to test
# that the later ones still run), HPCTRAIN_GPU_CHECK_DRY_RUN=1 (stages print their command instead of running).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
script=$repo/scripts/gpu-check.sh
deps=${HPCTRAIN_GPU_DEPS:-$repo/.gpu-deps}
root=$deps/root
tarball=$deps/prefix.tar.gz
build_dir=${HPCTRAIN_GPU_BUILD_DIR:-$repo/build-gpu}
python=${PYTHON:-python3}
arch=x86_64-linux-gnu
# What the build and the check need beyond torch, cmake, ninja, a compiler and the allowlist below, with the
# libraries they load (Debian 12). libcurl4/libssl3 and their closure: libhdf5_serial.so.103 needs libcurl.so.4
# and libcrypto.so.3; libudev1 and libnuma1: hwloc; openssh-client: mpirun's launcher looks for ssh at start-up.
packages=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers libnl-3-200 libnl-route-3-200 libpsm2-2
  libpsm-infinipath1 libuuid1 librdmacm1 libmunge2 libnuma1 libudev1 libatomic1
  libhdf5-dev libhdf5-103-1 libhdf5-cpp-103-1 libhdf5-hl-100 libsz2 libaec0
  libcurl4 libssl3 libnghttp2-14 libidn2-0 libunistring2 librtmp1 libgnutls30 libhogweed6 libnettle8 libgmp10
  libp11-kit0 libffi8 libtasn1-6 libssh2-1 libpsl5 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0
  libkeyutils1 libcom-err2 libldap-2.5-0 libsasl2-2 libsasl2-modules-db libdb5.3 libzstd1 libbrotli1
  libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0 libboost-test1.74-dev
  libboost-test1.74.0 libfmt-dev libfmt9 nlohmann-json3-dev libutf8proc-dev libutf8proc2
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 zlib1g-dev zlib1g pkgconf libpkgconf3 pkgconf-bin
  openssh-client libedit2 libbsd0 libmd0 libtinfo6 libfido2-1 libcbor0.8 libselinux1
)
# Libraries every machine has, resolved outside the prefix: glibc's, the C++ runtime and zlib.
allowlist='^(ld-linux-x86-64\.so\.2|linux-vdso\.so\.1|lib(c|m|dl|pthread|rt|resolv|util|anl)\.so\.[0-9]+|libstdc\+\+\.so\.6|libgcc_s\.so\.1|libz\.so\.1)$'
prefix_libdirs() { echo "$root/usr/lib/$arch:$root/usr/lib/$arch/hdf5/serial:$root/lib/$arch"; }

log() { echo "gpu-check: $*" >&2; }

# ---- prepare (here) ----

prepare() {
  mkdir -p "$deps/debs" || return 1
  (cd "$deps/debs" && apt-get download "${packages[@]}") >"$deps/download.log" 2>&1 \
    || { cat "$deps/download.log" >&2; log "apt-get download failed"; return 1; }
  rm -rf "$root" && mkdir -p "$root" || return 1
  local deb
  for deb in "$deps"/debs/*.deb; do dpkg -x "$deb" "$root" || { log "dpkg -x $deb failed"; return 1; }; done
  # Debian's maintainer scripts (update-alternatives) make these names; dpkg -x runs no scripts.
  local tool
  for tool in mpirun mpiexec mpicc mpicxx; do ln -sf "$tool.openmpi" "$root/usr/bin/$tool"; done
  ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$root/usr/lib/$arch/libpsm_infinipath.so.1"  # an alternative too
  rm -rf "$root"/usr/share/{doc,man,info,locale,lintian,bug} && find "$root" -name '*.a' -delete
  rm -rf "$root/usr/lib/$arch/ucx"  # UCX's transport plugins: unused (shared memory only), and they load from /usr
  local program
  for program in mpirun orted ssh mpicc pkgconf; do
    [[ -x $(readlink -f "$root/usr/bin/$program") ]] || { log "the prefix has no runnable usr/bin/$program"; return 1; }
  done
  closure_check || return 1
  tar czf "$tarball" -C "$deps" root || return 1
  local bytes
  bytes=$(stat -c %s "$tarball")
  log "$tarball: $((bytes / 1048576)) MiB (with the working tree, under the device tool's 64 MiB)"
  ((bytes < 52 * 1048576)) || { log "the prefix is too large to carry with the working tree"; return 1; }
}

# closure_check: every ELF file of the prefix (programs, libraries, plugins) finds each library it needs (readelf's
# NEEDED) in the prefix's library folders, in its own folder, or in the allowlist. Prints what is missing.
closure_check() {
  local dirs missing=0 file needed lib found libs
  dirs="$(prefix_libdirs):$root/usr/lib/$arch/openmpi/lib"
  while IFS= read -r file; do
    head -c 4 "$file" 2>/dev/null | grep -q $'^\x7fELF' || continue
    while read -r needed; do
      [[ $needed =~ $allowlist ]] && continue
      found=0
      IFS=: read -r -a libs <<<"$dirs:$(dirname "$file")"
      for lib in "${libs[@]}"; do [[ -e $lib/$needed ]] && { found=1; break; }; done
      ((found)) || { echo "missing: $needed (needed by ${file#"$repo"/})"; missing=1; }
    done < <(readelf -d "$file" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  done < <(find "$root/usr/bin" "$root/usr/lib" "$root/lib" -type f \( -perm -u+x -o -name '*.so*' \) 2>/dev/null)
  ((missing == 0)) && log "closure check: every library the prefix's programs and plugins need is in it or allowed"
  return "$missing"
}

# ---- the prefix (there, and in rehearse here) ----

# use_prefix: unpacks the carried prefix once and points compilers, pkg-config, CMake and Open MPI at it.
use_prefix() {
  if [[ ! -d $root/usr && -f $tarball ]]; then tar xzf "$tarball" -C "$deps" || return 1; fi
  [[ -d $root/usr ]] || { log "no prefix in $root: run 'scripts/gpu-check.sh prepare' here and carry .gpu-deps/prefix.tar.gz"; return 1; }
  export OPAL_PREFIX=$root/usr                       # relocates Open MPI (its wrappers, plugins, help files)
  # PMIx and hwloc load their plugins from folders compiled in (/usr/lib/...): pointed at the prefix's (rehearse
  # found them loaded from this machine's /usr through LD_DEBUG).
  export PMIX_PKGLIBDIR=$root/usr/lib/$arch/pmix2/lib/pmix HWLOC_PLUGINS_PATH=$root/usr/lib/$arch/hwloc
  export PATH=$root/usr/bin:$PATH
  LD_LIBRARY_PATH=$(prefix_libdirs)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
  export PKG_CONFIG=$root/usr/bin/pkgconf PKG_CONFIG_SYSROOT_DIR=$root
  export PKG_CONFIG_LIBDIR=$root/usr/lib/$arch/pkgconfig:$root/usr/share/pkgconfig
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  # Ranks on one machine talk through shared memory: no probing of InfiniBand or UCX devices that are absent.
  # No single-copy (CMA) between ranks: containers and sandboxes (gVisor) often forbid process_vm_readv.
  export OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1 OMPI_MCA_osc=^ucx OMPI_MCA_btl_vader_single_copy_mechanism=none
  [[ -n ${torch_dir:-} ]] || torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))' 2>/dev/null) \
    || { log "$python cannot import torch"; return 1; }
}

# torch_ldpath: where the binaries find LibTorch and the CUDA libraries of the wheel (nvidia/*/lib).
torch_ldpath() {
  local path=$torch_dir/lib dir
  for dir in "$torch_dir"/../nvidia/*/lib "$torch_dir"/../nvidia/cu*/lib; do [[ -d $dir ]] && path+=:$(cd "$dir" && pwd); done
  echo "$path"
}

# ---- build (there) ----

# The targets the check runs: the hpctrain program (equivalence, training runs, throughput).
build_targets=(hpctrain)

build() {
  local out=$1 log=$1/build.log status
  mkdir -p "$out" && use_prefix || return 1
  local nvcc cuda_args=() launcher=()
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  if [[ -x $nvcc ]]; then
    cuda_args=(-DHPCTRAIN_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$(dirname "$(dirname "$nvcc")")")
  fi
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  local start=$SECONDS
  {
    echo "== configure $build_dir ($(date -u +%FT%TZ))"
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} cmake -S "$repo" -B "$build_dir" -G Ninja \
      -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" -DHPCTRAIN_BUILD_TESTS=OFF -DHPCTRAIN_BUILD_BENCH=OFF \
      "-DCMAKE_PREFIX_PATH=$torch_dir;$torch_dir/share/cmake;$root/usr;$root/usr/lib/$arch/cmake" \
      -DMPI_C_COMPILER="$root/usr/bin/mpicc" -DMPIEXEC_EXECUTABLE="$root/usr/bin/mpirun" \
      -DHDF5_C_INCLUDE_DIR="$root/usr/include/hdf5/serial" \
      -DHDF5_hdf5_LIBRARY_RELEASE="$root/usr/lib/$arch/hdf5/serial/libhdf5.so" \
      -DHDF5_C_COMPILER_EXECUTABLE=HDF5_C_COMPILER_EXECUTABLE-NOTFOUND -DHDF5_ROOT="$root/usr" \
      -DZLIB_ROOT="$root/usr" -DBoost_ROOT="$root/usr" "${cuda_args[@]}" &&
    echo "== ninja -k 0 ${build_targets[*]} ($(date -u +%FT%TZ))" &&
    ninja -C "$build_dir" -k 0 -j "${JOBS:-$(nproc)}" "${build_targets[@]}"
  } >"$log" 2>&1
  status=$?
  echo "== build: exit $status after $((SECONDS - start)) s" >>"$log"
  grep -E 'error:|FAILED:|CMake Error' "$log" | head -20 >&2
  log "build: exit $status after $((SECONDS - start)) s (the whole log: $log)"
  return "$status"
}

# ---- preflight (there, < 30 s) ----

# preflight OUT: what the build and the check need, each line "ok: ..." or "PROBLEM: ..." in OUT/preflight.txt.
preflight() {
  local out=$1 report=$1/preflight.txt
  mkdir -p "$out" && : >"$report" || return 1
  if use_prefix 2>>"$report"; then echo "ok: prefix $root, torch in $torch_dir" >>"$report"
  else echo "PROBLEM: the prefix or torch (above)" >>"$report"
  fi
  "$python" - "${HPCTRAIN_GPU_DEVICE:-cuda}" >>"$report" 2>&1 <<'PYEOF' || echo "PROBLEM: the Python checks did not finish" >>"$report"
import sys
device = sys.argv[1]
def ok(what): print("ok:", what)
def problem(what): print("PROBLEM:", what)
try:
    import torch
except Exception as e:
    problem(f"import torch: {e}"); sys.exit(0)
version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
# The device-generic autocast API (torch::autocast::is_autocast_enabled(device_type)) arrived in 2.4.
(ok if version >= (2, 4) else problem)(f"torch {torch.__version__} (>= 2.4 for the device-generic autocast API)")
abi = torch.compiled_with_cxx11_abi()
(ok if abi else problem)(f"torch's C++11 ABI: {abi} (Debian's Boost and fmt use the new ABI)")
print(f"ok: torch.version.cuda {torch.version.cuda or ''}")
if device == "cuda":
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        ok(f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}, capability {torch.cuda.get_device_capability(0)}")
    else:
        problem("torch sees no CUDA device (HPCTRAIN_GPU_DEVICE=cuda)")
else:
    ok(f"device {device}: no GPU needed")
try:
    import numpy
    ok(f"numpy {numpy.__version__} (tests/mpi_train/compare_weights.py)")
except Exception as e:
    problem(f"numpy not importable (tests/mpi_train/compare_weights.py): {e}")
# Found, not imported (transformers takes seconds to import): the optional ones.
import importlib.metadata, importlib.util
for module, why in (("h5py", "tests/mpi_train/lib.sh's row counts"), ("transformers", "the PyTorch eager peer")):
    if importlib.util.find_spec(module):
        ok(f"{module} {importlib.metadata.version(module)} ({why})")
    else:
        print(f"note: no {module} ({why}: that part is skipped)")
PYEOF
  local torch_cuda
  torch_cuda=$(sed -n 's/^ok: torch.version.cuda //p' "$report")
  preflight_tools "$torch_cuda" >>"$report" 2>&1
  preflight_libraries >>"$report" 2>&1
  cat "$report"
  ! grep -q '^PROBLEM' "$report"
}

# version_at_least HAVE WANT: dotted versions compared field by field.
version_at_least() { [[ $(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1) == "$2" ]]; }

# preflight_tools TORCH_CUDA: the programs the build and the check run (TORCH_CUDA: torch.version.cuda).
preflight_tools() {
  local cmake_version nvcc_version torch_cuda=${1:-}
  cmake_version=$(cmake --version 2>/dev/null | sed -n 's/^cmake version \([0-9.]*\).*/\1/p')
  if [[ -n $cmake_version ]] && version_at_least "$cmake_version" 3.25; then echo "ok: cmake $cmake_version (>= 3.25)"
  else echo "PROBLEM: cmake ${cmake_version:-missing} (CMakeLists.txt needs >= 3.25)"
  fi
  command -v ninja >/dev/null && echo "ok: ninja $(ninja --version)" || echo "PROBLEM: no ninja"
  command -v c++ >/dev/null && echo "ok: c++ $(c++ -dumpfullversion 2>/dev/null)" || echo "PROBLEM: no C++ compiler (c++)"
  command -v readelf >/dev/null || echo "note: no readelf (the closure check here uses ldd only)"
  nvcc_version=$( (command -v nvcc || echo /usr/local/cuda/bin/nvcc) | xargs -I{} sh -c '{} --version 2>/dev/null' \
    | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  if [[ -z $nvcc_version ]]; then
    [[ ${HPCTRAIN_GPU_DEVICE:-cuda} == cuda ]] && echo "PROBLEM: no nvcc (LibTorch's CMake files need the CUDA toolkit)" \
      || echo "note: no nvcc: a CPU build"
  elif [[ -z $torch_cuda ]]; then echo "PROBLEM: torch is a CPU build (torch.version.cuda is None) but nvcc $nvcc_version is here"
  elif [[ ${nvcc_version%%.*} != "${torch_cuda%%.*}" ]] || ! version_at_least "$torch_cuda" "$nvcc_version"; then
    echo "PROBLEM: nvcc $nvcc_version against torch's CUDA $torch_cuda (the same major, nvcc not newer than torch's runtime)"
  else echo "ok: nvcc $nvcc_version, torch's CUDA $torch_cuda"
  fi
  local tool
  for tool in ssh mpirun orted; do  # from the prefix, not from this machine
    [[ $(readlink -f "$(command -v "$tool")") == "$(readlink -f "$root")"/* ]] \
      || echo "PROBLEM: $tool is $(command -v "$tool" || echo missing), not the prefix's"
  done
  ssh -V >/dev/null 2>&1 && echo "ok: $(ssh -V 2>&1)" || echo "PROBLEM: ssh does not run (Open MPI's launcher looks for it)"
  if mpirun --version >/dev/null 2>&1 && timeout 30 mpirun -np 2 --bind-to none true >/dev/null 2>"$deps/mpirun.err"; then
    echo "ok: $(mpirun --version 2>&1 | head -1), mpirun -np 2 true runs"
  else echo "PROBLEM: mpirun -np 2 true failed: $(head -c 600 "$deps/mpirun.err" 2>/dev/null)"
  fi
}

# preflight_libraries: every ELF file of the prefix (and the built hpctrain) resolves each library through the
# real loader (ldd, one call for all) inside the prefix, torch's folders or the allowlist; anything else is named.
preflight_libraries() {
  local files=()
  mapfile -t files < <(find "$root/usr/bin" "$root/usr/lib" "$root/lib" -type f \( -perm -u+x -o -name '*.so*' \) 2>/dev/null)
  [[ -x $build_dir/hpctrain ]] && files+=("$build_dir/hpctrain")
  # ldd exits 1 when some file is no dynamic executable (scripts): its status is not the answer.
  { LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(torch_ldpath) ldd "${files[@]}" 2>&1 || true; } | "$python" -c '
import os, re, sys
allow, dirs, repo = re.compile(sys.argv[1]), [os.path.realpath(d) for d in sys.argv[2].split(":") if d], sys.argv[3]
problems, checked, current = 0, 0, ""
for line in sys.stdin:
    if not line.startswith(("\t", " ")):
        current, checked = line.strip().rstrip(":").replace(repo + "/", ""), checked + 1
        continue
    m = re.match(r"\s*(\S+)(?: => (\S+))?", line)
    soname, path = m.group(1), m.group(2)
    if "not found" in line:
        print(f"PROBLEM: {soname} not found (needed by {current})"); problems += 1
    elif path and not allow.match(soname) and not any(os.path.realpath(path).startswith(d + "/") for d in dirs):
        print(f"PROBLEM: {soname} resolves outside the prefix: {path} ({current})"); problems += 1
if not problems:
    print(f"ok: {checked} files checked with ldd: every library resolves in the prefix, torch\x27s folders or the allowlist")
sys.exit(1 if problems else 0)
' "$allowlist" "$root:$(torch_ldpath)" "$repo"
}

# ---- check (there) ----

# The stages in order. Each runs as its own process (`gpu-check.sh _stage NAME`) under a time limit: exit 0 ok,
# 77 skipped (the last line says why), anything else failed; a failure never stops the stages after it.
# NAME:LIMIT, the limit in seconds on the GPU (expected there: about a fifth of it).
stages=(
  equivalence:120 fixture:30
  train-bf16-1rank:45 train-bf16-2ranks:45 train-fp16-scaler:45 train-checkpointing:45 train-resume:90
  train-adafactor:45 train-sgd:45 train-adamw8bit:45 train-grad-reduce-bf16:45
  throughput-distilbert-base:150 throughput-causal-lm:150 mfu:45 memory:10
)

check() {
  local out=$1
  mkdir -p "$out" || return 1
  export HPCTRAIN_GPU_DEVICE=${HPCTRAIN_GPU_DEVICE:-cuda} HPCTRAIN_SHARE_GPUS=1  # 2 ranks share the one GPU
  export GC_WORK=$deps/work GC_BIN=$build_dir/hpctrain GC_RESULTS=$out/check-results.jsonl
  if [[ -z ${HPCTRAIN_GPU_CHECK_DRY_RUN:-} ]]; then
    use_prefix || return 1
    # A machine that went back between the calls lost build-gpu/: build again (ninja: a no-op when it is there).
    [[ -x $GC_BIN ]] || build "$out" || { log "no $GC_BIN and the build failed"; return 1; }
    LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(torch_ldpath)
    export LD_LIBRARY_PATH torch_dir
  fi
  local logs=$deps/check-logs summary=$out/check-summary.txt
  rm -rf "$GC_WORK" "$logs" && mkdir -p "$GC_WORK" "$logs" && : >"$GC_RESULTS" || return 1
  # The whole command must end inside the device tool's 10 minutes with its summary written: stages start while
  # the budget (seconds since this command started, the build included) lasts, each within its own limit. On a CPU
  # (rehearse) the limits are 6 times longer and there is no budget.
  local budget=${HPCTRAIN_GPU_CHECK_BUDGET:-500} scale=1
  [[ $HPCTRAIN_GPU_DEVICE == cuda ]] || { scale=6 budget=0; }
  local entry name limit n=0 start rc status failed=0 note stage_log
  { echo "# $(date -u +%FT%TZ), device $HPCTRAIN_GPU_DEVICE, $(nvidia-smi -L 2>/dev/null | head -1 || echo 'no nvidia-smi')"
    printf '%-28s %-7s %7s  %s\n' stage status seconds note; } >"$summary"
  for entry in "${stages[@]}"; do
    name=${entry%:*} limit=$((${entry#*:} * scale)) n=$((n + 1))
    [[ $name =~ ${HPCTRAIN_GPU_CHECK_STAGES:-.} ]] || continue
    stage_log=$logs/$(printf %02d "$n")-$name.log
    start=$SECONDS
    if ((budget > 0 && budget - SECONDS < 20)); then
      echo "not run: the budget of $budget s (HPCTRAIN_GPU_CHECK_BUDGET) was spent" >"$stage_log"; rc=1
    else
      ((budget > 0 && budget - SECONDS < limit)) && limit=$((budget - SECONDS))
      log "stage $name (at most $limit s) ..."
      timeout --kill-after=10 "$limit" "$script" _stage "$name" >"$stage_log" 2>&1
      rc=$?
      ((rc == 124 || rc == 137)) && echo "stopped after its limit of $limit s" >>"$stage_log"
    fi
    case $rc in 0) status=ok ;; 77) status=skipped ;; *) status=FAILED failed=$((failed + 1)) ;; esac
    note=$(grep -v '^[[:space:]]*$' "$stage_log" | tail -1 | cut -c1-150)
    printf '%-28s %-7s %7d  %s\n' "$name" "$status" "$((SECONDS - start))" "$note" | tee -a "$summary" >&2
  done
  echo "$failed stage(s) failed; logs in check-logs.tar.gz" >>"$summary"
  tar czf "$out/check-logs.tar.gz" -C "$deps" check-logs
  cat "$summary"
  ((failed == 0))
}

# run_stage NAME: the stage's own process (HPCTRAIN_GPU_CHECK_FAIL and _DRY_RUN act here, so that the runner
# sees a real process fail or pass).
run_stage() {
  if [[ ${HPCTRAIN_GPU_CHECK_FAIL:-} == "$1" ]]; then echo "failing on purpose (HPCTRAIN_GPU_CHECK_FAIL=$1)"; return 1; fi
  declare -F "stage_${1//-/_}" >/dev/null || { echo "no function stage_${1//-/_} for stage $1"; return 1; }
  if [[ -n ${HPCTRAIN_GPU_CHECK_DRY_RUN:-} ]]; then echo "dry run: stage_${1//-/_}"; return 0; fi
  use_prefix >/dev/null && "stage_${1//-/_}"
}

# mpi N ARGS...: hpctrain under mpirun -np N.
mpi() { local np=$1; shift; mpirun --oversubscribe --bind-to none -np "$np" "$GC_BIN" "$@"; }
on_gpu() { [[ $HPCTRAIN_GPU_DEVICE == cuda ]]; }
skip() { echo "skipped: $*"; exit 77; }
result() { echo "$1" >>"$GC_RESULTS"; echo "result: $1"; }

# ---- the stages (each runs in its own process) ----

stage_equivalence() {
  HPCTRAIN_TEST_DEVICE=$HPCTRAIN_GPU_DEVICE HPCTRAIN_TEST_PYTHON=$python \
    bash "$repo/tests/mpi_train/test_equivalence.sh" "$GC_BIN" "$repo" mpirun
}

# The training runs' data: 512 texts of 3 colours (3 labels), a 33-word vocabulary, 32 tokens; a DistilBERT of
# width 128 (4 heads of 32: flash attention's head sizes), 2 layers.
stage_fixture() {
  local fixture=$GC_WORK/fixture
  mkdir -p "$fixture/tok" || return 1
  { printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'
    printf '%s\n' red green blue apple pear plum sky sea leaf fire stone wood cloud rain sun moon star tree rock sand \
      the a of and is was very quite small big old new; } >"$fixture/tok/vocab.txt"
  echo '{"do_lower_case": true, "model_max_length": 32}' >"$fixture/tok/tokenizer_config.json"
  "$python" - "$fixture/rows.jsonl" <<'PYEOF' || return 1
import json, random, sys
random.seed(5)
colors = {"red": ["apple", "fire", "stone"], "green": ["leaf", "tree", "pear"], "blue": ["sky", "sea", "moon"]}
filler = ["the", "a", "of", "and", "is", "was", "very", "quite", "small", "big", "old", "new", "cloud", "rain", "sand"]
with open(sys.argv[1], "w") as out:
    for i in range(512):
        label = ["red", "green", "blue"][i % 3]
        words = random.sample(filler, random.randint(4, 14)) + [random.choice(colors[label])]
        random.shuffle(words)
        out.write(json.dumps({"text": " ".join(words), "label": label}) + "\n")
PYEOF
  "$GC_BIN" prep text --input "$fixture/rows.jsonl" --text-field text --label-field label --tokenizer "$fixture/tok" \
    --max-length 32 --validation-fraction 0.1 --seed 3 --compression none --no-progress --output "$fixture/data.h5" || return 1
  cat >"$fixture/config.json" <<'JSON'
{"model_type": "distilbert", "vocab_size": 40, "dim": 128, "n_layers": 2, "n_heads": 4, "hidden_dim": 512,
 "max_position_embeddings": 32, "dropout": 0.0, "attention_dropout": 0.0, "seq_classif_dropout": 0.0}
JSON
  echo "fixture: $fixture"
}

# train_case NP NAME ARGS...: a 12-step run (STEPS, SAVE_STEPS, LR: other values) on the fixture (global shuffle, batch 8 per rank); it must exit 0 with
# every logged loss finite and a final model written.
train_case() {
  local np=$1 name=$2 fixture=$GC_WORK/fixture; shift 2
  [[ -f $fixture/data.h5 ]] || { echo "no fixture: the fixture stage failed"; return 1; }
  mpi "$np" train --model-config "$fixture/config.json" --data "$fixture/data.h5" --tokenizer "$fixture/tok" \
    --output "$GC_WORK/$name" --device "$HPCTRAIN_GPU_DEVICE" --threads 1 --no-progress --report-to none \
    --shuffle global --max-steps "${STEPS:-12}" --batch-size 8 --lr "${LR:-1e-3}" --warmup-steps 2 --logging-steps 1 \
    --save-steps "${SAVE_STEPS:-100}" --eval-steps 100 "$@" 2>&1 | tee "$GC_WORK/$name.log"
  local rc=$?
  ((rc == 0)) || { echo "hpctrain train exited with $rc: $(grep -m1 -E 'error|what\(\)' "$GC_WORK/$name.log")"; return 1; }
  [[ -f $GC_WORK/$name/final/model.safetensors ]] || { echo "no final model"; return 1; }
  "$python" - "$GC_WORK/$name/metrics.jsonl" <<'PYEOF'
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
losses = [r["loss"] for r in rows if "loss" in r]
scales = [r["loss_scale"] for r in rows if "loss_scale" in r]
print("losses:", [round(x, 4) for x in losses], "loss scale:", scales[-1] if scales else "none")
sys.exit(0 if losses and all(math.isfinite(x) for x in losses) else 1)
PYEOF
}

stage_train_bf16_1rank() { train_case 1 bf16-1 --mixed-precision bf16; }
stage_train_bf16_2ranks() { train_case 2 bf16-2 --mixed-precision bf16; }
stage_train_fp16_scaler() {
  on_gpu || skip "fp16 autocast needs --device cuda (this run: $HPCTRAIN_GPU_DEVICE)"
  train_case 2 fp16 --mixed-precision fp16 --loss-scale auto || return 1
  grep -q '"loss_scale"' "$GC_WORK/fp16/metrics.jsonl" || { echo "metrics.jsonl records no loss_scale"; return 1; }
}
stage_train_checkpointing() { train_case 2 checkpointing --mixed-precision bf16 --gradient-checkpointing; }
stage_train_adafactor() { train_case 2 adafactor --optim adafactor; }
stage_train_sgd() { LR=1e-2 train_case 2 sgd --optim sgd --sgd-momentum 0.9; }
stage_train_adamw8bit() { train_case 2 adamw8bit --optim adamw_8bit; }
stage_train_grad_reduce_bf16() { train_case 2 grad-reduce-bf16 --grad-reduce-dtype bf16; }

# Resume: 12 steps straight equal 6 steps, then --resume auto to 12, within RESUME_TOLERANCE (the infinity norm of
# the weight difference over that of the weights, compare_weights.py): 0 (bitwise) on the CPU; 1e-5 on a GPU, whose
# embedding backward adds with atomics in no fixed order.
stage_train_resume() {
  local tolerance=0
  on_gpu && tolerance=1e-5
  SAVE_STEPS=6 train_case 2 resume-whole --lr-scheduler constant || return 1
  SAVE_STEPS=6 STEPS=6 train_case 2 resume-pieces --lr-scheduler constant || return 1
  SAVE_STEPS=6 train_case 2 resume-pieces --lr-scheduler constant --resume auto || return 1
  "$python" "$repo/tests/mpi_train/compare_weights.py" "$GC_WORK/resume-whole/final/model.safetensors" \
    "$GC_WORK/resume-pieces/final/model.safetensors" "$tolerance" || { echo "resumed weights differ by more than $tolerance"; return 1; }
  echo "resumed == uninterrupted within $tolerance"
}

# Whole training steps (loader, forward, backward, gradient reduction, clipping, AdamW) of DistilBERT-base (66 M
# parameters, sequence 128, bf16 autocast) on 1 rank: hpctrain train against PyTorch eager with SDPA + autocast
# (bench/models/torch_train_steps.py), one after the other; each one's peak device memory (nvidia-smi's used memory
# sampled every 100 ms: the allocator's cache and the CUDA context included) or, on the CPU, peak RSS.
stage_throughput_distilbert_base() {
  local tp=$GC_WORK/throughput batch=32 steps=60 rows=2048 threads=4
  on_gpu || { batch=4 steps=6 rows=256 threads=2; }
  mkdir -p "$tp" || return 1
  cat >"$tp/config.json" <<'JSON'
{"model_type": "distilbert", "vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
 "max_position_embeddings": 512, "dropout": 0.1, "attention_dropout": 0.1, "seq_classif_dropout": 0.2, "num_labels": 2}
JSON
  "$python" - "$repo/data/bert-base-uncased/vocab.txt" "$tp/rows.jsonl" "$rows" <<'PYEOF' || return 1
import json, random, sys
words = [w.strip() for w in open(sys.argv[1]) if w.strip().isalpha()][2000:]
random.seed(1)
with open(sys.argv[2], "w") as out:
    for i in range(int(sys.argv[3])):  # 160 words: at least 128 tokens, every row full
        out.write(json.dumps({"text": " ".join(random.choices(words, k=160)), "label": i % 2}) + "\n")
PYEOF
  "$GC_BIN" prep text --input "$tp/rows.jsonl" --text-field text --label-field label --tokenizer "$repo/data/bert-base-uncased" \
    --max-length 128 --seed 1 --compression none --no-progress --output "$tp/data.h5" >"$tp/prep.log" 2>&1 \
    || { cat "$tp/prep.log"; return 1; }
  local failed=0 timer=()
  [[ -x /usr/bin/time ]] && timer=(/usr/bin/time -f 'maxrss_kb %M' -o "$tp/hpctrain.rss")  # the largest process's
  memory_sampler "$tp/hpctrain.mem" "${timer[@]}" mpirun --oversubscribe --bind-to none -np 1 "$GC_BIN" train --model-config "$tp/config.json" --data "$tp/data.h5" \
    --tokenizer "$repo/data/bert-base-uncased" --output "$tp/hpctrain" --device "$HPCTRAIN_GPU_DEVICE" \
    --mixed-precision bf16 --batch-size "$batch" --max-steps "$steps" --logging-steps $((steps / 6)) --lr 1e-4 \
    --threads "$threads" --no-progress --report-to none --save-steps 100000 --eval-steps 100000 || failed=1
  "$python" - "$tp" "$batch" "$steps" <<'PYEOF' >>"$GC_RESULTS" || failed=1
import json, statistics, sys
tp, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = [json.loads(line) for line in open(tp + "/hpctrain/metrics.jsonl") if '"samples_per_second"' in line]
steady = [r["samples_per_second"] for r in rows if r["step"] > steps // 6] or [r["samples_per_second"] for r in rows]
row = {"stage": "throughput", "impl": "hpctrain", "model": "distilbert-base", "batch": batch, "seq_length": 128,
       "steps": steps, "samples_per_s": statistics.median(steady), "step_times": rows[-1].get("time")}
for name, key in (("mem", "peak_device_memory_bytes"), ("rss", "peak_rss_bytes")):
    try:
        values = [float(line.split()[-1]) for line in open(f"{tp}/hpctrain.{name}") if line.strip()]
        row[key] = int(max(values) * (1 << 20 if name == "mem" else 1024))
    except (OSError, ValueError):
        pass
print(json.dumps(row))
PYEOF
  local peer=("$python" "$repo/bench/models/torch_train_steps.py" --config "$tp/config.json" --device "$HPCTRAIN_GPU_DEVICE"
              --batch "$batch" --steps "$steps" --warmup $((steps / 6)) --threads "$threads")
  memory_sampler "$tp/peer.mem" "${peer[@]}" >"$tp/peer.json"
  case $? in 0) ;; 77) cat "$tp/peer.json"; failed=1 ;; *) failed=1 ;; esac
  "$python" - "$tp" <<'PYEOF' >>"$GC_RESULTS" || failed=1
import json, sys
tp = sys.argv[1]
row = json.loads(open(tp + "/peer.json").read().splitlines()[-1])
try:
    row["peak_device_memory_bytes"] = int(max(float(l) for l in open(tp + "/peer.mem") if l.strip()) * (1 << 20))
except (OSError, ValueError):
    pass
print(json.dumps(dict(stage="throughput", model="distilbert-base", **row)))
PYEOF
  "$python" - "$GC_RESULTS" <<'PYEOF'
import json, sys
rates = {r["impl"]: r["samples_per_s"] for r in map(json.loads, open(sys.argv[1])) if r.get("stage") == "throughput"}
line = ", ".join(f"{impl} {rate:.1f} samples/s" for impl, rate in rates.items())
if len(rates) == 2:
    line += f"; hpctrain / PyTorch = {rates['hpctrain'] / rates['pytorch-eager-sdpa']:.2f}"
print(line or "no throughput measured")
PYEOF
  return "$failed"
}

# memory_sampler FILE CMD...: runs CMD; on a GPU, nvidia-smi writes the device's used MiB to FILE every 100 ms
# meanwhile (the difference to the idle reading is what CMD took).
memory_sampler() {
  local file=$1 sampler=; shift
  if on_gpu && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$file" 2>/dev/null &
    sampler=$!
  fi
  "$@"
  local rc=$?
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null && wait "$sampler" 2>/dev/null
  return "$rc"
}

# The causal LMs: a GPT-2 and a Llama (GQA) built from config.json, trained on packed rows of `prep lm` (bf16,
# AdamW) by hpctrain and by the PyTorch eager peer (transformers' own models, SDPA), whole steps; hpctrain's
# tokens/s and MFU are its metrics.jsonl's (Note [Model FLOPs]). On the CPU (rehearse) the models are small.
stage_throughput_causal_lm() {
  local tp=$GC_WORK/throughput-lm batch=16 steps=40 dim=768 layers=12 heads=12 threads=4
  on_gpu || { batch=2 steps=6 dim=128 layers=2 heads=4 threads=2; }
  mkdir -p "$tp" || return 1
  cat >"$tp/gpt2.json" <<JSON
{"model_type": "gpt2", "vocab_size": 50257, "n_embd": $dim, "n_layer": $layers, "n_head": $heads, "n_positions": 1024}
JSON
  cat >"$tp/llama.json" <<JSON
{"model_type": "llama", "vocab_size": 32000, "hidden_size": $dim, "intermediate_size": $((dim * 8 / 3)),
 "num_hidden_layers": $layers, "num_attention_heads": $heads, "num_key_value_heads": $((heads / 2)),
 "max_position_embeddings": 2048}
JSON
  "$python" - "$tp/docs.jsonl" <<'PYEOF' || return 1
import json, random
random.seed(1)
words = ["the", "of", "and", "data", "model", "train", "rank", "token", "layer", "step", "batch", "loss", "grad"]
with open(__import__("sys").argv[1], "w") as out:
    for _ in range(3000):
        out.write(json.dumps({"text": " ".join(random.choices(words, k=200))}) + "\n")
PYEOF
  "$GC_BIN" prep lm --input "$tp/docs.jsonl" --text-field text --tokenizer "$repo/tests/tokenize/golden/bpe/gpt2" \
    --block-size 128 --no-progress --output "$tp/data.h5" >"$tp/prep.log" 2>&1 || { cat "$tp/prep.log"; return 1; }
  local failed=0 model
  for model in gpt2 llama; do
    mpirun --oversubscribe --bind-to none -np 1 "$GC_BIN" train --model-config "$tp/$model.json" --data "$tp/data.h5" \
      --output "$tp/hpctrain-$model" --device "$HPCTRAIN_GPU_DEVICE" --mixed-precision bf16 --batch-size "$batch" \
      --max-steps "$steps" --logging-steps $((steps / 4)) --lr 1e-4 --threads "$threads" --no-progress \
      --report-to none --save-steps 100000 --eval-steps 100000 >"$tp/hpctrain-$model.log" 2>&1 \
      || { tail -20 "$tp/hpctrain-$model.log"; failed=1; continue; }
    "$python" "$repo/bench/models/torch_train_steps.py" --config "$tp/$model.json" --task causal-lm \
      --device "$HPCTRAIN_GPU_DEVICE" --batch "$batch" --seq-length 128 --steps "$steps" --warmup $((steps / 4)) \
      --threads "$threads" >"$tp/peer-$model.json"
    case $? in 0 | 77) ;; *) failed=1 ;; esac
    "$python" - "$tp" "$model" "$batch" "$steps" <<'PYEOF' >>"$GC_RESULTS" || failed=1
import json, statistics, sys
tp, model, batch, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = [json.loads(l) for l in open(f"{tp}/hpctrain-{model}/metrics.jsonl") if '"tokens_per_second"' in l]
steady = [r for r in rows if r["step"] > steps // 4] or rows
ours = statistics.median(r["tokens_per_second"] for r in steady)
mfu = statistics.median(r.get("mfu", 0) for r in steady)
row = {"stage": "throughput-lm", "model": model, "batch": batch, "seq_length": 128, "hpctrain_tokens_per_s": ours,
       "hpctrain_mfu_of_measured_peak": mfu}
peer = open(f"{tp}/peer-{model}.json").read().splitlines()
if peer and peer[-1].startswith("{"):
    theirs = json.loads(peer[-1])["samples_per_s"] * 128
    row.update(pytorch_tokens_per_s=theirs, ratio=ours / theirs)
else:
    row["pytorch"] = peer[-1] if peer else "no output"
print(json.dumps(row))
print(f"{model}: hpctrain {ours:.0f} tok/s (MFU {100 * mfu:.1f} % of the measured peak)"
      + (f", PyTorch eager {row['pytorch_tokens_per_s']:.0f} tok/s, ratio {row['ratio']:.2f}" if "ratio" in row else
         f", PyTorch: {row['pytorch']}"), file=sys.stderr)
PYEOF
  done
  return "$failed"
}

# MFU: the training FLOPs of a step over the time, against the measured bf16 GEMM (bench/models/gemm_peak.py) and
# the H200's spec peak, 989 TFLOP/s dense bf16.
stage_mfu() {
  local n=8192
  on_gpu || n=1024
  "$python" "$repo/bench/models/gemm_peak.py" --device "$HPCTRAIN_GPU_DEVICE" --dtype bf16 --n "$n" >"$GC_WORK/gemm.json" \
    || return 1
  "$python" - "$GC_WORK/gemm.json" "$GC_RESULTS" <<'PYEOF'
import json, sys
gemm = json.loads(open(sys.argv[1]).read().splitlines()[-1])["tflops"]
rows = [json.loads(l) for l in open(sys.argv[2]) if '"stage": "throughput"' in l]
if not rows:
    print("no throughput rows: the throughput stage failed"); sys.exit(1)
spec = 989.0
dim, layers, ffn, seq, vocab = 768, 6, 3072, 128, 30522
# Training FLOPs per sample: 6 per parameter and token for the layers and the classifier (the embedding lookup is
# no product) plus the attention products (QK^T and AV: 2 x 2 x seq x dim per token and layer, x3 with backward).
params = layers * (4 * dim * dim + 2 * dim * ffn) + dim * dim
flops = 6 * params * seq + 3 * 4 * layers * seq * seq * dim
summary = []
with open(sys.argv[2], "a") as out:
    for r in rows:
        tflops = r["samples_per_s"] * flops / 1e12
        row = {"stage": "mfu", "impl": r["impl"], "tflops": tflops, "mfu_measured_gemm": tflops / gemm,
               "measured_gemm_tflops": gemm, "mfu_spec_peak": tflops / spec, "spec_peak_tflops": spec}
        out.write(json.dumps(row) + "\n")
        print(f"{r['impl']}: {r['samples_per_s']:.1f} samples/s, {tflops:.2f} TFLOP/s, MFU {100 * tflops / gemm:.1f} % of "
              f"the measured bf16 GEMM ({gemm:.1f} TFLOP/s), {100 * tflops / spec:.2f} % of the 989 TFLOP/s spec peak")
        summary.append(f"{r['impl']} {100 * tflops / gemm:.1f} / {100 * tflops / spec:.2f} %")
print("MFU (of the measured GEMM / of the spec peak): " + ", ".join(summary))
PYEOF
}

stage_memory() {
  "$python" - "$GC_RESULTS" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"stage": "throughput"' in l]
if not rows:
    print("no throughput rows: the throughput stage failed"); sys.exit(1)
for r in rows:
    parts = [f"{k} {r[k] / 2**30:.2f} GiB" for k in ("peak_device_memory_bytes", "peak_memory_allocated_bytes",
             "peak_memory_reserved_bytes", "peak_rss_bytes") if k in r]
    print(f"{r['impl']}: " + ", ".join(parts or ["no reading"]))
print("peak: " + "; ".join(f"{r['impl']} {max(r.get(k, 0) for k in ('peak_device_memory_bytes', 'peak_rss_bytes')) / 2**30:.2f} GiB"
                           for r in rows))
PYEOF
}

# ---- rehearse (here) ----

# rehearse OUT: preflight, build and check on this machine as they run there: the prefix unpacked afresh from the
# tarball that travels, LD_LIBRARY_PATH holding only the prefix and torch's folders, --device cpu. Besides the
# ldd check of every file (preflight), every process started from the prefix or the build records what the loader
# actually loaded (LD_DEBUG=files): a library from outside the prefix, torch's folders and the allowlist fails it.
rehearse() {
  local out=$1 report=$1/rehearse.txt failed=0 start verb
  mkdir -p "$out" && : >"$report" || return 1
  [[ -f $tarball ]] || { log "no $tarball: running prepare"; prepare || return 1; }
  rm -rf "$root"
  unset LD_LIBRARY_PATH
  export HPCTRAIN_GPU_DEVICE=cpu LD_DEBUG_OUTPUT=$deps/ld-debug/pid
  rm -rf "$deps/ld-debug" && mkdir -p "$deps/ld-debug"
  for verb in preflight build loader check; do
    start=$SECONDS
    case $verb in
      preflight) (preflight "$out") ;;
      build) (build "$out") ;;
      loader) (use_prefix && preflight_libraries | tee "$out/loader.txt" && ! grep -q PROBLEM "$out/loader.txt" && build_headers) ;;
      check) (export LD_DEBUG=files; check "$out"; rc=$?; unset LD_DEBUG; loaded_libraries; exit $((rc | $?))) ;;
    esac
    local rc=$?
    ((rc == 0)) || failed=1
    printf '%-10s %-7s %6d s\n' "$verb" "$([[ $rc == 0 ]] && echo ok || echo FAILED)" "$((SECONDS - start))" | tee -a "$report"
  done
  return "$failed"
}

# build_headers: no object of the build included a header of a packaged library from this machine's /usr/include
# (there it would be missing): ninja's dependency records name every header each object read.
build_headers() {
  local outside
  # ccache (base_dir) records paths relative to the build folder: made absolute before they are compared.
  outside=$(ninja -C "$build_dir" -t deps | sed -n 's/^ \{4\}//p' | sort -u | (cd "$build_dir" && xargs realpath -m) \
    | grep -E '^/usr/include/(boost|hdf5|nlohmann|fmt|utf8proc|pcre2|zlib|zconf|x86_64-linux-gnu/(openmpi|mpi)|openmpi|mpi)' | sort -u)
  if [[ -n $outside ]]; then
    echo "PROBLEM: headers read from /usr/include instead of the prefix:"; echo "$outside" | head -20
    return 1
  fi
  echo "ok: every packaged library's header came from the prefix ($(ninja -C "$build_dir" -t deps | sed -n 's/^ \{4\}//p' \
    | sort -u | (cd "$build_dir" && xargs realpath -m) | grep -c "^$root/") headers from it)"
}

# loaded_libraries: the LD_DEBUG records of the processes whose program is in the prefix or the build
# (mpirun, orted, ssh, hpctrain): every library they loaded, dlopen'ed plugins included, lies inside the
# prefix, torch's folders or the allowlist.
loaded_libraries() {
  use_prefix >/dev/null || return 1
  "$python" - "$deps/ld-debug" "$allowlist" "$root:$(torch_ldpath):$build_dir" "$repo" <<'PYEOF'
import glob, os, re, shutil, sys
folder, allow, repo = sys.argv[1], re.compile(sys.argv[2]), sys.argv[4]
dirs = [os.path.realpath(d) + "/" for d in sys.argv[3].split(":") if d]
ours = [dirs[0], dirs[-1]]  # programs from the prefix or the build
checked, problems = 0, set()
for name in glob.glob(folder + "/pid.*"):
    text = open(name, errors="replace").read()
    program = re.search(r"needed by (\S+) \[0\]", text)
    path = program and (shutil.which(program.group(1)) or program.group(1))  # "mpirun": as found on PATH
    if not path or not any(os.path.realpath(path).startswith(d) for d in ours):
        continue
    checked += 1
    for lib in set(re.findall(r"calling init: (\S+)", text)):
        if not allow.match(os.path.basename(lib)) and not any(os.path.realpath(lib).startswith(d) for d in dirs):
            problems.add(f"PROBLEM: {program.group(1).replace(repo + '/', '')} loaded {lib}")
if problems:
    print("\n".join(sorted(problems)))
if not checked:
    print("PROBLEM: no loader records of the prefix's or the build's programs"); sys.exit(1)
if not problems:
    print(f"ok: {checked} processes of the prefix and the build loaded libraries from the prefix, torch's folders "
          "and the allowlist only")
sys.exit(1 if problems else 0)
PYEOF
}

# ---- verbs ----

case ${1:-} in
  prepare) prepare ;;
  preflight) preflight "${2:-$deps/out}" ;;
  build) build "${2:-$deps/out}" ;;
  check) check "${2:-$deps/out}" ;;
  rehearse) rehearse "${2:-$deps/out}" ;;
  _stage) run_stage "$2" ;;
  *) echo "usage: $0 prepare | preflight [OUT_DIR] | build [OUT_DIR] | check [OUT_DIR] | rehearse [OUT_DIR]" >&2; exit 2 ;;
esac
