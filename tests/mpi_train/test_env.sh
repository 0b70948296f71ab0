# `hpctrain env` under mpirun -np 2: the table and the JSON show both ranks and the libraries (either LibTorch
# configuration: Debian's 1.13 or the 2.x wheel's); a rank that cannot
# have its device fails the command on every rank with a clear message (dist::run_collectively).
source "$(dirname "$0")/lib.sh"
run_ok "env under mpirun -np 2" "$WORK/env.txt" mpi 2 env --threads 1
for pattern in '^LibTorch +[0-9]+\.[0-9]+\.[0-9]+' '^MPI +Open MPI' '^HDF5 +1\.' '^CPU ' '^0 +0/2 ' '^1 +1/2 '; do
  if grep -Eq "$pattern" "$WORK/env.txt"; then ok "env table has /$pattern/"; else bad "env table lacks /$pattern/"; cat "$WORK/env.txt"; fi
done
if mpi 2 env --json --threads 1 >"$WORK/env.json" 2>"$WORK/err" && "$PY" - "$WORK/env.json" <<'PYEOF'; then ok "env --json"; else bad "env --json"; cat "$WORK/env.json" "$WORK/err"; fi
import json, re, sys
e = json.load(open(sys.argv[1]))
assert e["world_size"] == 2 and [r["rank"] for r in e["ranks"]] == [0, 1], e["ranks"]
assert sorted(r["local_rank"] for r in e["ranks"]) == [0, 1] and all(r["threads"] == 1 for r in e["ranks"])
assert len({r["pid"] for r in e["ranks"]}) == 2 and all(r["device"] == "cpu" for r in e["ranks"])
assert e["mpi"]["library"].startswith("Open MPI") and e["mpi"]["cuda_aware"] is False, e["mpi"]
assert re.fullmatch(r"\d+\.\d+\.\d+", e["hdf5"]["library"]) and re.match(r"\d+\.\d+\.\d+", e["libtorch"]["version"])
assert set(e["cpu"]["capability"]) >= {"avx2", "avx512f", "avx512_bf16", "amx_tile"}
PYEOF
if mpi 2 env --device cuda >"$WORK/out" 2>"$WORK/err"; then bad "env --device cuda without a GPU: exit 0";
elif grep -q "cuda" "$WORK/err"; then ok "env --device cuda without a GPU fails clearly"; else bad "env --device cuda: $(cat "$WORK/err")"; fi

finish
