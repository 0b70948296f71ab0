# A run folder belongs to one run (issue 12, item 3): a second run on a used folder is refused and leaves the old
# run's files byte-identical; --overwrite-output-dir is allowed and never deletes the old run's checkpoints; two
# concurrent runs on one folder: the second fails at once naming the holder; rotation keeps other runs' checkpoints.
source "$(dirname "$0")/lib.sh"
make_fixture
quick=(--batch-size 8 --max-steps 4 --save-steps 2 --eval-steps 100)
snapshot() { (cd "$1" && find . -type f ! -name run.lock -print0 | sort -z | xargs -0 sha256sum); }

run_ok "first run" "$WORK/a.log" mpi 2 train $(train_args "$WORK/run") "${quick[@]}"
[[ -f "$WORK/run/run.json" ]] && ok "run.json records the run" || bad "no run.json"
"$PY" -c "import json,sys; r=json.load(open('$WORK/run/run.json')); sys.exit(0 if len(r['run_id'])>=16 and r['pid']>0 and r['host'] else 1)" \
  && ok "run.json: run id, host, pid" || bad "run.json fields"
snapshot "$WORK/run" >"$WORK/before.sums"

mpi 2 train $(train_args "$WORK/run") "${quick[@]}" >"$WORK/b.log" 2>&1
rc=$?
[[ $rc -ne 0 ]] && ok "second run on the used folder refused" || bad "second run on the used folder exited 0"
grep -q "holds another run" "$WORK/b.log" && grep -q -- "--overwrite-output-dir" "$WORK/b.log" \
  && ok "  the message names the folder and the way out" || { bad "  message"; tail -5 "$WORK/b.log"; }
snapshot "$WORK/run" | cmp -s - "$WORK/before.sums" && ok "  the old run's files are byte-identical" \
  || { bad "  the old run's files changed"; snapshot "$WORK/run" | diff - "$WORK/before.sums" | head; }

# --overwrite-output-dir: a new run in the folder; it replaces final/ and trainer_state.json, keeps the old checkpoints.
old_id=$("$PY" -c "import json; print(json.load(open('$WORK/run/run.json'))['run_id'])")
run_ok "--overwrite-output-dir allowed" "$WORK/c.log" mpi 2 train $(train_args "$WORK/run") --batch-size 8 \
  --max-steps 3 --save-steps 1 --save-total-limit 1 --eval-steps 100 --overwrite-output-dir
new_id=$("$PY" -c "import json; print(json.load(open('$WORK/run/run.json'))['run_id'])")
[[ "$new_id" != "$old_id" ]] && ok "  a new run id" || bad "  the run id was kept"
# kept STEP NAME: the old run's checkpoint-STEP is byte-identical, now at NAME.
kept() { grep " ./checkpoint-$1/" "$WORK/before.sums" | sed "s# ./checkpoint-$1/# ./$2/#" | (cd "$WORK/run" && sha256sum -c --quiet -); }
kept 4 checkpoint-4 >/dev/null 2>&1 && ok "  the old run's checkpoint-4 is kept intact (rotation skips it)" \
  || bad "  the old run's checkpoint-4 changed or was removed"
kept 2 "checkpoint-2.run-$old_id" >/dev/null 2>&1 && ok "  the old run's checkpoint-2 (same step as a new one) moved aside intact" \
  || { bad "  the old run's checkpoint-2 changed or was removed"; ls "$WORK/run"; }
[[ -d "$WORK/run/checkpoint-3" && ! -d "$WORK/run/checkpoint-1" ]] \
  && ok "  --save-total-limit 1 rotated the new run's own checkpoints only (checkpoint-3 kept)" || { bad "  rotation"; ls "$WORK/run"; }
"$PY" -c "import json,sys; s=json.load(open('$WORK/run/trainer_state.json')); sys.exit(0 if s['global_step']==3 else 1)" \
  && ok "  trainer_state.json is the new run's" || bad "  trainer_state.json"

# --resume auto continues the folder's run (its identity), also after --overwrite-output-dir.
run_ok "--resume auto on the used folder" "$WORK/d.log" mpi 2 train $(train_args "$WORK/run") --batch-size 8 \
  --max-steps 5 --save-steps 1 --save-total-limit 1 --eval-steps 100 --resume auto
grep -q "resuming at step 3" "$WORK/d.log" && ok "  resumed this run's newest checkpoint (3, not the old run's 4)" \
  || { bad "  resume point"; grep -i resum "$WORK/d.log"; }
[[ "$("$PY" -c "import json; print(json.load(open('$WORK/run/run.json'))['run_id'])")" == "$new_id" ]] \
  && ok "  the run id continues" || bad "  the run id changed on resume"
[[ -d "$WORK/run/checkpoint-5" && ! -d "$WORK/run/checkpoint-3" && ! -d "$WORK/run/checkpoint-4" ]] \
  && ok "  rotation after resume: own checkpoints 3 and 4 removed, 5 kept" || { bad "  rotation after resume"; ls "$WORK/run"; }
kept 4 "checkpoint-4.run-$old_id" >/dev/null 2>&1 && kept 2 "checkpoint-2.run-$old_id" >/dev/null 2>&1 \
  && ok "  the old run's checkpoints 2 and 4 are still intact" || { bad "  the old run's checkpoints"; ls "$WORK/run"; }

# Two runs at once on one folder: the second fails at once, naming the folder and the holder.
long=(--batch-size 2 --max-steps 1000000 --save-steps 1000000 --eval-steps 1000000)  # runs until killed
mpi 2 train $(train_args "$WORK/live") "${long[@]}" >"$WORK/live1.log" 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "step 1/\|step 1 " "$WORK/live1.log" 2>/dev/null && break; [[ -f "$WORK/live/run.json" ]] && break; sleep 0.2; done
start=$(date +%s)
mpi 2 train $(train_args "$WORK/live") "${long[@]}" --overwrite-output-dir >"$WORK/live2.log" 2>&1
rc=$?
elapsed=$(($(date +%s) - start))
[[ $rc -ne 0 ]] && ok "a concurrent second run is refused (even with --overwrite-output-dir)" || bad "the concurrent second run exited 0"
grep -q "in use by another run" "$WORK/live2.log" && grep -Eq "pid [0-9]+" "$WORK/live2.log" \
  && ok "  the message names the folder and the holder's host/pid" || { bad "  message"; tail -5 "$WORK/live2.log"; }
[[ $elapsed -le 30 ]] && ok "  it failed at once (${elapsed}s)" || bad "  it took ${elapsed}s"
kill -0 "$first" 2>/dev/null && ok "  the first run is still running" || { bad "  the first run died"; tail -5 "$WORK/live1.log"; }
grep -q "error" "$WORK/live1.log" && bad "  the first run reported an error" || ok "  the first run is undisturbed"
pkill -TERM -P "$first" 2>/dev/null  # mpirun (the child of the background subshell): it ends its ranks
wait "$first" 2>/dev/null
finish
