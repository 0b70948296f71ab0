# kill -9 of one rank: the job exits non-zero within 30 s, the newest checkpoint stays complete, and
# --resume auto continues from it to the end.
source "$(dirname "$0")/lib.sh"
make_fixture 0.1
run=(--max-steps 100000 --save-steps 5 --batch-size 4)

mpi 2 train $(train_args "$WORK/run") "${run[@]}" >"$WORK/killed.log" 2>&1 &
launcher=$!
# Wait for the second checkpoint, then kill rank 1 (found by its OMPI_COMM_WORLD_RANK).
for _ in $(seq 1 600); do [[ -d "$WORK/run/checkpoint-10" ]] && break; sleep 0.2; done
[[ -d "$WORK/run/checkpoint-10" ]] && ok "training reached checkpoint-10" || { bad "no checkpoint-10"; cat "$WORK/killed.log"; }
victim=$(rank_pid run 1)  # this run's rank 1, not another test's
[[ -n "$victim" ]] && ok "found rank 1 (pid $victim)" || bad "rank 1 not found"
killed_at=$(date +%s)
kill -9 "$victim"
for _ in $(seq 1 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$launcher" 2>/dev/null; then
  bad "job still running 30 s after kill -9"
  kill -9 "$launcher"
else
  wait "$launcher"
  rc=$?
  elapsed=$(( $(date +%s) - killed_at ))
  [[ $rc -ne 0 ]] && ok "job exited non-zero ($rc) ${elapsed}s after kill -9" || bad "job exited 0 after a kill"
fi
kill_runs  # none should be left

# Every checkpoint folder is complete (Note [Complete checkpoints]); hidden temporaries may remain.
latest=$(ls -d "$WORK"/run/checkpoint-* | sed 's/.*checkpoint-//' | sort -n | tail -1)
for dir in "$WORK"/run/checkpoint-*; do
  for f in config.json model.safetensors optimizer.safetensors trainer_state.json vocab.txt; do
    [[ -f "$dir/$f" ]] || bad "$(basename "$dir") lacks $f"
  done
done
ok "checkpoints complete (newest: checkpoint-$latest)"
target=$((latest + 3))
run_ok "resume auto after the kill" "$WORK/resumed.log" mpi 2 train $(train_args "$WORK/run") --max-steps "$target" \
  --save-steps 5 --batch-size 4 --resume auto
grep -q "resuming at step $latest " "$WORK/resumed.log" && ok "resumed from checkpoint-$latest" \
  || { bad "resume point"; head -20 "$WORK/resumed.log"; }
grep -q "\"global_step\": $target," "$WORK/run/trainer_state.json" && ok "finished at step $target" || bad "final step"
finish
