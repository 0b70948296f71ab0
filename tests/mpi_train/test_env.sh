# `hpctrain env` under mpirun -np 2: the table and the JSON show both ranks and the libraries (either LibTorch
# configuration: Debian's 1.13 or the 2.x wheel's); a rank that cannot
# have its device fails the command on every rank with a clear message (dist::run_collectively).
# The device checks adapt to the machine: without a GPU `--device cuda` fails; with one GPU two ranks need
# HPCTRAIN_SHARE_GPUS=1; with two or more each rank gets its own (Note [One GPU per rank]). One
# CUDA_VISIBLE_DEVICES exported to both ranks is refused by name wherever a GPU would be used.
source "$(dirname "$0")/lib.sh"
run_ok "env under mpirun -np 2" "$WORK/env.txt" mpi 2 env --threads 1 --device cpu
for pattern in '^LibTorch +[0-9]+\.[0-9]+\.[0-9]+' '^MPI +Open MPI' '^HDF5 +1\.' '^CPU ' '^0 +0/2 ' '^1 +1/2 '; do
  if grep -Eq "$pattern" "$WORK/env.txt"; then ok "env table has /$pattern/"; else bad "env table lacks /$pattern/"; cat "$WORK/env.txt"; fi
done
if mpi 2 env --json --threads 1 --device cpu >"$WORK/env.json" 2>"$WORK/err" && "$PY" - "$WORK/env.json" <<'PYEOF'; then ok "env --json"; else bad "env --json"; cat "$WORK/env.json" "$WORK/err"; fi
import json, re, sys
e = json.load(open(sys.argv[1]))
assert e["world_size"] == 2 and [r["rank"] for r in e["ranks"]] == [0, 1], e["ranks"]
assert sorted(r["local_rank"] for r in e["ranks"]) == [0, 1] and all(r["threads"] == 1 for r in e["ranks"])
assert len({r["pid"] for r in e["ranks"]}) == 2 and all(r["device"] == "cpu" for r in e["ranks"])
assert e["mpi"]["library"].startswith("Open MPI") and e["mpi"]["cuda_aware"] is False, e["mpi"]
assert re.fullmatch(r"\d+\.\d+\.\d+", e["hdf5"]["library"]) and re.match(r"\d+\.\d+\.\d+", e["libtorch"]["version"])
assert set(e["cpu"]["capability"]) >= {"avx2", "avx512f", "avx512_bf16", "amx_tile"}
PYEOF
gpus=$("$PY" -c 'import json, sys; t = json.load(open(sys.argv[1]))["libtorch"]; print(t["cuda_devices"] if t["cuda"] else 0)' \
  "$WORK/env.json" 2>/dev/null || echo 0)
echo "GPUs visible to LibTorch: $gpus"
# devices_are JSON EXPECTED...: the ranks' devices in the env JSON, in rank order.
devices_are() {
  "$PY" -c 'import json, sys; d = [r["device"] for r in json.load(open(sys.argv[1]))["ranks"]]; sys.exit(d != sys.argv[2:])' "$@"
}
if [[ $gpus -eq 0 ]]; then
  if mpi 2 env --device cuda >"$WORK/out" 2>"$WORK/err"; then bad "env --device cuda without a GPU: exit 0";
  elif grep -q "cuda" "$WORK/err"; then ok "env --device cuda without a GPU fails clearly"; else bad "env --device cuda: $(cat "$WORK/err")"; fi
elif [[ $gpus -eq 1 ]]; then
  if mpi 2 env --device cuda >"$WORK/out" 2>"$WORK/err"; then bad "2 ranks, 1 GPU, no sharing: exit 0";
  elif grep -q "HPCTRAIN_SHARE_GPUS=1" "$WORK/err"; then ok "2 ranks on 1 GPU refused, naming HPCTRAIN_SHARE_GPUS";
  else bad "2 ranks on 1 GPU: $(cat "$WORK/err")"; fi
  if HPCTRAIN_SHARE_GPUS=1 mpi 2 env --json --device cuda >"$WORK/shared.json" 2>"$WORK/err" \
     && devices_are "$WORK/shared.json" cuda:0 cuda:0; then ok "HPCTRAIN_SHARE_GPUS=1: both ranks on cuda:0";
  else bad "HPCTRAIN_SHARE_GPUS=1: $(cat "$WORK/shared.json" "$WORK/err")"; fi
else
  if mpi 2 env --json --device cuda >"$WORK/gpus.json" 2>"$WORK/err" && devices_are "$WORK/gpus.json" cuda:0 cuda:1; then
    ok "one GPU per rank: cuda:0 and cuda:1"; else bad "one GPU per rank: $(cat "$WORK/gpus.json" "$WORK/err")"; fi
fi
if [[ $gpus -ge 1 ]]; then
  if CUDA_VISIBLE_DEVICES=0 mpi 2 env --device cuda >"$WORK/out" 2>"$WORK/err"; then bad "shared CUDA_VISIBLE_DEVICES: exit 0";
  elif grep -q "CUDA_VISIBLE_DEVICES=0" "$WORK/err"; then ok "one CUDA_VISIBLE_DEVICES exported to both ranks is refused by name";
  else bad "shared CUDA_VISIBLE_DEVICES: $(cat "$WORK/err")"; fi
fi

finish
