# Verified checkpoints (issue 12, item 5): every checkpoint has a sha256sum manifest; a flipped byte in the newest
# checkpoint makes --resume auto fall back to the previous intact one (saying which and why), an explicit --resume of
# it fails naming the file; trainer_state.json fields are validated (epoch 1e6, negative step, wrong types).
source "$(dirname "$0")/lib.sh"
make_fixture
quick=(--batch-size 8 --save-steps 2 --eval-steps 100)
run_ok "train 4 steps (checkpoints 2 and 4)" "$WORK/a.log" mpi 2 train $(train_args "$WORK/run") "${quick[@]}" --max-steps 4
for step in 2 4; do
  (cd "$WORK/run/checkpoint-$step" && sha256sum -c --quiet checksums.sha256) \
    && ok "checkpoint-$step: sha256sum -c checksums.sha256 passes" || bad "checkpoint-$step: manifest"
  for f in model.safetensors optimizer.safetensors trainer_state.json config.json; do
    grep -q "  $f\$" "$WORK/run/checkpoint-$step/checksums.sha256" || bad "checkpoint-$step: $f not in the manifest"
  done
done
cp -r "$WORK/run" "$WORK/pristine"

flip() {  # flip FILE: invert one byte in the middle of FILE
  "$PY" -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[len(b)//2]^=0xff; open(p,'wb').write(b)" "$1"
}
flip "$WORK/run/checkpoint-4/model.safetensors"
run_ok "--resume auto with a corrupt newest checkpoint" "$WORK/b.log" mpi 2 train $(train_args "$WORK/run") "${quick[@]}" \
  --max-steps 6 --resume auto
grep -q "skipping checkpoint-4" "$WORK/b.log" && grep -q "model.safetensors" "$WORK/b.log" \
  && ok "  says checkpoint-4 is skipped and why (model.safetensors)" || { bad "  no skip message"; grep -i "resum\|skip" "$WORK/b.log"; }
grep -q "resuming at step 2" "$WORK/b.log" && ok "  resumed from checkpoint-2" || { bad "  resume point"; grep -i resum "$WORK/b.log"; }

rm -rf "$WORK/run" && cp -r "$WORK/pristine" "$WORK/run"
flip "$WORK/run/checkpoint-4/model.safetensors"
expect_fail() {  # expect_fail NAME PATTERN ARGS...: training fails and the log matches PATTERN
  local name=$1 pattern=$2; shift 2
  if mpi 2 train $(train_args "$WORK/run") "${quick[@]}" --max-steps 6 "$@" >"$WORK/f.log" 2>&1; then bad "$name: exit 0"
  elif grep -Eq -- "$pattern" "$WORK/f.log"; then ok "$name"
  else bad "$name: log does not match /$pattern/"; tail -5 "$WORK/f.log"; fi
}
expect_fail "explicit --resume of the corrupt checkpoint fails naming the file" \
  "checkpoint-4/model.safetensors.*(SHA-256|checksum)" --resume "$WORK/run/checkpoint-4"

rm -rf "$WORK/run" && cp -r "$WORK/pristine" "$WORK/run"
state="$WORK/run/checkpoint-4/trainer_state.json"
edit_state() {  # edit_state PYTHON_EXPR_ON_s: rewrites trainer_state.json and its manifest line (a consistent edit)
  "$PY" - "$state" "$1" <<'PYEOF'
import hashlib, json, os, sys
path, expr = sys.argv[1], sys.argv[2]
s = json.load(open(path))
exec(expr)
open(path, "w").write(json.dumps(s, indent=2) + "\n")
manifest = os.path.join(os.path.dirname(path), "checksums.sha256")
digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
lines = [f"{digest}  trainer_state.json" if l.endswith("  trainer_state.json") else l for l in open(manifest).read().splitlines()]
open(manifest, "w").write("\n".join(lines) + "\n")
PYEOF
}
cp "$state" "$WORK/state.orig"
cp "$WORK/run/checkpoint-4/checksums.sha256" "$WORK/manifest.orig"
restore() { cp "$WORK/state.orig" "$state"; cp "$WORK/manifest.orig" "$WORK/run/checkpoint-4/checksums.sha256"; }
edit_state 's["epoch"] = 1e6'
expect_fail "trainer_state.json with epoch 1e6 refused, naming the file and field" \
  "checkpoint-4/trainer_state.json.*'epoch'" --resume "$WORK/run/checkpoint-4"
restore; edit_state 's["hpctrain"]["epoch_index"] = 1000000'
expect_fail "epoch_index 1e6 refused" "trainer_state.json.*epoch_index" --resume "$WORK/run/checkpoint-4"
restore; edit_state 's["global_step"] = -3'
expect_fail "negative global_step refused" "trainer_state.json.*'global_step'" --resume "$WORK/run/checkpoint-4"
restore; edit_state 's["global_step"] = 99'
expect_fail "global_step beyond max_steps refused" "trainer_state.json.*'global_step'.*max_steps" --resume "$WORK/run/checkpoint-4"
restore; edit_state 's["global_step"] = "4"'
expect_fail "global_step of the wrong type refused" "trainer_state.json.*'global_step'.*(type|integer)" --resume "$WORK/run/checkpoint-4"
restore; edit_state 's["hpctrain"]["samples_seen"] = 2.5'
expect_fail "a fractional samples_seen refused" "trainer_state.json.*samples_seen" --resume "$WORK/run/checkpoint-4"
restore; echo '{"global_step": 4, ' >"$state"
expect_fail "a truncated trainer_state.json names the file" "checkpoint-4/trainer_state.json" --resume "$WORK/run/checkpoint-4"
restore
run_ok "the restored checkpoint resumes" "$WORK/g.log" mpi 2 train $(train_args "$WORK/run") "${quick[@]}" --max-steps 6 \
  --resume "$WORK/run/checkpoint-4"
finish
