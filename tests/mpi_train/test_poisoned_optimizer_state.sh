# A poisoned optimizer state (issue 25, item 3): checkpoint-2 of an 8-bit AdamW run, its optimizer.safetensors
# rewritten consistently (checksums.sha256 recomputed) with a NaN or negative absmax, int8 codes where uint8
# belong, or a negative step. `--resume auto` fails on both ranks within seconds, naming optimizer.safetensors
# and the tensor, and trains no step (Note [Optimizer state checks]); the untouched checkpoint resumes.
source "$(dirname "$0")/lib.sh"
make_fixture
# hidden_dim 128: each lin1/lin2 weight has 4,096 elements, enough for 8-bit (quantized) moments
sed 's/"hidden_dim": 64/"hidden_dim": 128/' "$WORK/config.json" >"$WORK/config.tmp" && mv "$WORK/config.tmp" "$WORK/config.json"
quick=(--optim adamw_8bit --batch-size 8 --save-steps 2 --eval-steps 100)
run_ok "train 2 steps with --optim adamw_8bit (checkpoint-2)" "$WORK/a.log" mpi 2 train $(train_args "$WORK/run") \
  "${quick[@]}" --max-steps 2
ckpt="$WORK/run/checkpoint-2"
cp "$WORK/run/final/model.safetensors" "$WORK/final.orig"
cp "$ckpt/optimizer.safetensors" "$WORK/optimizer.orig" && cp "$ckpt/checksums.sha256" "$WORK/manifest.orig"
restore() { cp "$WORK/optimizer.orig" "$ckpt/optimizer.safetensors"; cp "$WORK/manifest.orig" "$ckpt/checksums.sha256"; }

# poison WHAT: rewrites optimizer.safetensors (nan_absmax, negative_absmax, int8_codes or negative_step) and its
# manifest line, and prints the name of the tensor it changed.
poison() {
  "$PY" - "$ckpt/optimizer.safetensors" "$1" <<'PYEOF'
import hashlib, json, os, struct, sys
path, what = sys.argv[1], sys.argv[2]
blob = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", blob[:8])
header = json.loads(blob[8:8 + n])
absmax = sorted(k for k in header if k.startswith("exp_avg_sq_absmax."))[0]
codes = sorted(k for k in header if k.startswith("exp_avg.") and header[k]["dtype"] == "U8")[0]
name = {"nan_absmax": absmax, "negative_absmax": absmax, "int8_codes": codes, "negative_step": "step"}[what]
begin = 8 + n + header[name]["data_offsets"][0]
if what == "nan_absmax":
    blob[begin:begin + 4] = struct.pack("<f", float("nan"))
elif what == "negative_absmax":
    blob[begin:begin + 4] = struct.pack("<f", -abs(struct.unpack("<f", blob[begin:begin + 4])[0]) - 1.0)
elif what == "negative_step":
    blob[begin:begin + 8] = struct.pack("<q", -3)
else:  # the same bytes, declared int8: "U8" -> "I8" keeps the header's length
    at = blob.index(b'"U8"', blob.index(json.dumps(name).encode() + b":"))
    blob[at:at + 4] = b'"I8"'
open(path, "wb").write(blob)
manifest = os.path.join(os.path.dirname(path), "checksums.sha256")
digest = hashlib.sha256(blob).hexdigest()
lines = [f"{digest}  optimizer.safetensors" if l.endswith("  optimizer.safetensors") else l
         for l in open(manifest).read().splitlines()]
open(manifest, "w").write("\n".join(lines) + "\n")
print(name)
PYEOF
}

# refused WHAT PATTERN: poisoned WHAT, --resume auto on 2 ranks fails (no hang) naming optimizer.safetensors and the
# tensor (every rank throws the Error rank 0's read raised; the first to print it ends the job), and trains no step.
refused() {
  local what=$1 pattern=$2 tensor
  restore
  tensor=$(poison "$what") || { bad "$what: could not edit the file"; return; }
  (cd "$ckpt" && sha256sum -c --quiet checksums.sha256) || bad "$what: the manifest does not match the edit"
  local start=$SECONDS code=0
  timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(train_args "$WORK/run") "${quick[@]}" \
    --max-steps 4 --resume auto >"$WORK/$what.log" 2>&1 || code=$?
  if [[ $code -eq 0 ]]; then bad "$what: resume exit 0"; return; fi
  [[ $code -ne 124 ]] && ok "$what: resume fails (exit $code, $((SECONDS - start)) s, no hang)" || bad "$what: resume hangs"
  local line="checkpoint-2/optimizer.safetensors': not a valid state of this adamw_bnb_8bit optimizer.*'$tensor' $pattern"
  grep -Eq -- "$line" "$WORK/$what.log" && ok "$what: the error names the file and '$tensor'" \
    || { bad "$what: log does not match /$line/"; tail -5 "$WORK/$what.log"; }
  grep -Eq -- "reading '.*optimizer.safetensors' failed on rank 0: '.*$line" "$WORK/$what.log" \
    && ok "$what: agreed by every rank (rank 0 read it)" || { bad "$what: not agreed"; tail -5 "$WORK/$what.log"; }
  [[ ! -e "$WORK/run/checkpoint-4" ]] && cmp -s "$WORK/run/final/model.safetensors" "$WORK/final.orig" \
    && ok "$what: no weights written" || bad "$what: trained on"
}
refused nan_absmax "holds nan at element 0 .*expected a finite number >= 0"
refused negative_absmax "holds -[0-9.e+-]+ at element 0 .*expected a finite number >= 0"
refused int8_codes "is I8, expected U8"
refused negative_step "is -3, expected an integer >= 0"

restore
run_ok "the untouched checkpoint resumes" "$WORK/b.log" mpi 2 train $(train_args "$WORK/run") "${quick[@]}" \
  --max-steps 4 --resume auto
grep -q "resuming at step 2" "$WORK/b.log" && ok "  from checkpoint-2" || { bad "  resume point"; grep -i resum "$WORK/b.log"; }
finish
