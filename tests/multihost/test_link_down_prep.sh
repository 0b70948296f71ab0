# The network between two hosts goes down during `hpctrain prep text` on 2 ranks (docs/reliability.md,
# "Network faults"): the link is cut as soon as the first bucket file exists (the ranks are tokenizing,
# Note [Prep at corpus scale]). Both ranks end within --collective-timeout + 5 s (plus slack) naming the
# peer they lost and the collective; no output file exists and no temporary is left (the watchdog removes
# each rank's own before it ends the job: Note [Cleanup before an abort]). Skips (77) without root.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
netns_setup
timeout_s=10
"$PY" - "$WORK/rows.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(120000):
        words = " ".join(f"word{(i * 7 + k) % 97} and more" for k in range(1 + i % 23))
        f.write(json.dumps({"text": f"row {i}: {words}", "label": ["red", "green", "blue"][i * i % 3]}) + "\n")
PYEOF
mkdir "$WORK/out"
two_hosts "${PER_RANK_STDERR[@]}" "$WORK/prep.err" "$HPCTRAIN" prep text --tokenizer "$REPO/data/bert-base-uncased" \
  --no-progress --threads 1 --input "$WORK/rows.jsonl" --validation-fraction 0.1 --memory-mb 4 \
  --collective-timeout $timeout_s --output "$WORK/out/data.h5" >"$WORK/prep.log" 2>&1 &
launcher=$!
cut_link_when "$WORK/out/data.h5.prep-*.r*" "$launcher" "$WORK/prep.log" && ok "link down while the ranks tokenize" \
  || bad "no bucket file"
start=$CUT_AT
ranks_end_within "link down during prep" $((timeout_s + 12)) "$start"  # + the tokenizing left after the cut
launcher_ends_after_link_up "link down during prep" "$launcher"
names_lost_peer "link down during prep" "$WORK/prep.err"
left=$(ls -A "$WORK/out")
[[ -z "$left" ]] && ok "no output file and no temporary left" || bad "left in the output folder: $left"
"$HPCTRAIN" prep text --tokenizer "$REPO/data/bert-base-uncased" --input "$WORK/rows.jsonl" --output "$WORK/bad.h5" \
  --collective-timeout -1 >"$WORK/bad.log" 2>&1 && bad "prep --collective-timeout -1 accepted" || {
  grep -q -- "--collective-timeout -1: expected seconds >= 0" "$WORK/bad.log" && ok "prep --collective-timeout -1 rejected" \
    || { bad "no message for prep --collective-timeout -1"; cat "$WORK/bad.log"; }; }
finish
