# --report-to tensorboard (issue 11, item 4): on 2 ranks, rank 0 writes OUTPUT/runs/events.out.tfevents.*; an
# independent reader (read_tfevents.py: the format description, both CRCs; then TensorBoard's EventAccumulator
# when HPCTRAIN_TENSORBOARD_PYTHON, else HPCTRAIN_TEST_PYTHON, has it) finds every tag/step/value of
# metrics.jsonl and nothing else, also after a resume from an earlier checkpoint: a second file whose SessionLog
# START drops the first file's steps after 3 (the resumed run logs every 2nd step, so the old step 5 must go).
# --report-to none writes no events; --overwrite-output-dir moves the old ones aside.
source "$(dirname "$0")/lib.sh"
# The reader needs only the standard library; TensorBoard's half runs where this interpreter has `tensorboard`.
READER_PY=${HPCTRAIN_TENSORBOARD_PYTHON:-$PY}
make_fixture
steps=(--batch-size 8 --save-steps 3 --eval-steps 3)

run_ok "6 steps on 2 ranks" "$WORK/a.log" mpi 2 train $(train_args "$WORK/run") "${steps[@]}" --max-steps 6
files=("$WORK"/run/runs/events.out.tfevents.*)
[[ ${#files[@]} -eq 1 && "$(basename "${files[0]}")" =~ ^events\.out\.tfevents\.[0-9]{10}\.[^.]+.*\.[0-9]+\.[0-9]+$ ]] \
  && ok "one event file, named events.out.tfevents.<time>.<host>.<pid>.<n>" || { bad "event files"; ls -la "$WORK/run/runs"; }
"$READER_PY" "$HERE/read_tfevents.py" "$WORK/run" >"$WORK/read-a.log" 2>&1 \
  && ok "the events hold metrics.jsonl's values ($(grep -E '^(own reader|tensorboard)' "$WORK/read-a.log" | tr '\n' ';'))" || { bad "events vs metrics.jsonl"; cat "$WORK/read-a.log"; }

run_ok "resume from checkpoint-3 to step 9, logging every 2nd step" "$WORK/b.log" mpi 2 train \
  $(train_args "$WORK/run" | sed 's/--logging-steps 1/--logging-steps 2/') "${steps[@]}" --max-steps 9 --resume "$WORK/run/checkpoint-3"
files=("$WORK"/run/runs/events.out.tfevents.*)
[[ ${#files[@]} -eq 2 ]] && ok "the resumed run appended a second event file" || { bad "event files after resume"; ls -la "$WORK/run/runs"; }
"$READER_PY" "$HERE/read_tfevents.py" "$WORK/run" >"$WORK/read-b.log" 2>&1 \
  && ok "after the resume the events equal metrics.jsonl (the first file's step 5 dropped: now every 2nd step is logged) ($(grep -E '^(own reader|tensorboard)' "$WORK/read-b.log" | tr '\n' ';'))" \
  || { bad "events vs metrics.jsonl after resume"; cat "$WORK/read-b.log"; }

# --overwrite-output-dir with --report-to none: the old run's events move aside (runs.run-ID), none are written.
run_ok "--overwrite-output-dir --report-to none (1 process)" "$WORK/c.log" "$HPCTRAIN" train $(train_args "$WORK/run") \
  --batch-size 8 --max-steps 1 --overwrite-output-dir --report-to none
old=("$WORK"/run/runs.run-*/events.out.tfevents.*)
[[ ${#old[@]} -eq 2 && ! -e "$WORK/run/runs" ]] && ok "  the old run's 2 event files are in runs.run-ID; no new runs/" \
  || { bad "  event files after --overwrite-output-dir --report-to none"; ls -R "$WORK/run" | head -30; }
[[ $(wc -l <"$WORK/run/metrics.jsonl") -ge 1 ]] && ok "  metrics.jsonl still written" || bad "  no metrics.jsonl"
"$HPCTRAIN" train $(train_args "$WORK/bad") --max-steps 1 --report-to wandb >"$WORK/d.log" 2>&1
[[ $? -ne 0 ]] && grep -q -- "--report-to 'wandb': expected tensorboard or none" "$WORK/d.log" \
  && ok "--report-to wandb refused, naming the option" || { bad "--report-to wandb"; tail -3 "$WORK/d.log"; }
finish
