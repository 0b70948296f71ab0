# `prep text` in bounded memory and failing cleanly (Note [Prep at corpus scale]): the peak RSS for an input many
# times --memory-mb stays within --memory-mb of a tiny run's; a bad row in rank 1's part fails both ranks naming the
# file and line; a failure after the bucket files exist leaves no output and no temporary.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
MPIRUN=(timeout 120 mpirun --oversubscribe --bind-to none -np 2)

# ~16 MB of JSONL (64,000 rows), a 100-row sample of it, and 2,000 rows with a malformed one at line 1,900.
"$PY" - "$WORK" <<'PYEOF'
import json, sys
work = sys.argv[1]
rows = [json.dumps({"text": f"sentence {i} " + " ".join(f"w{(i * 13 + k) % 501}" for k in range(30 + i % 40)),
                    "label": f"l{i % 5}"}) + "\n" for i in range(4000)]
with open(f"{work}/big.jsonl", "w") as f:
    for _ in range(16):
        f.writelines(rows)
with open(f"{work}/tiny.jsonl", "w") as f:
    f.writelines(rows[:100])
with open(f"{work}/bad.jsonl", "w") as f:
    f.writelines(rows[:1899])
    f.write('{"text": "broken, "label": "l1"}\n')
    f.writelines(rows[1899:1999])
PYEOF

prep() { "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 --overwrite "$@"; }
size_mb=$(( $(stat -c %s "$WORK/big.jsonl") >> 20 ))
base=$("$PY" "$(dirname "$0")/prep_peak_rss.py" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 \
  --input "$WORK/tiny.jsonl" --output "$WORK/tiny.h5" --memory-mb 4)
peak=$("$PY" "$(dirname "$0")/prep_peak_rss.py" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 \
  --input "$WORK/big.jsonl" --output "$WORK/big.h5" --memory-mb 4 --validation-fraction 0.1)
echo "input ${size_mb} MiB: peak RSS ${peak} MiB, tiny input ${base} MiB, --memory-mb 4"
if [[ -n ${HPCTRAIN_SANITIZED:-} ]]; then  # scripts/sanitize.sh: ASan's quarantine and shadow memory are in the RSS
  [[ -n "$peak" ]] && ok "prep of ${size_mb} MiB ran (under sanitizers the peak RSS is not compared)" || bad "no peak RSS"
else
  [[ -n "$peak" && -n "$base" && $((peak - base)) -le $((4 + 24)) ]] && ok "peak RSS within --memory-mb (+24 MiB) of a tiny run's" \
    || bad "peak RSS ${peak} MiB for a ${size_mb} MiB input, tiny run ${base} MiB, --memory-mb 4"
fi
n=$("$PY" -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(len(f['train/labels']) + len(f['validation/labels']))" "$WORK/big.h5")
[[ "$n" == 64000 ]] && ok "every row written" || bad "$n rows written"

# A bad row in rank 1's half: both ranks fail with its file and line; no output, no temporaries.
expect_failure "bad row on rank 1 fails the job" 'failed on rank 1: .*bad\.jsonl: line 1900 .*malformed JSON' \
  "${MPIRUN[@]}" "$HPCTRAIN" prep text --tokenizer "$TOKENIZER" --no-progress --threads 1 --input "$WORK/bad.jsonl" --output "$WORK/bad.h5"
[[ $(grep -c "^\[rank [01]\] error: .*bad\.jsonl: line 1900" "$WORK/err") == 2 ]] && ok "both ranks report it" || { bad "both ranks"; cat "$WORK/err"; }
expect_no_file "no output or temporary after the bad row" "$WORK/bad.h5"

# A failure after the bucket files exist: the output appears meanwhile (another job wrote it), so rank 0 refuses
# to replace it; every rank's bucket files and the writer's temporary are removed.
mkdir "$WORK/late"
( for _ in $(seq 1 3000); do ls "$WORK/late" | grep -q '\.prep-' && { echo theirs >"$WORK/late/out.h5"; break; }; sleep 0.01; done ) &
watcher=$!
expect_failure "output written meanwhile: the job fails" 'out\.h5 already exists' "${MPIRUN[@]}" "$HPCTRAIN" prep text \
  --tokenizer "$TOKENIZER" --no-progress --threads 1 --input "$WORK/big.jsonl" --output "$WORK/late/out.h5" --memory-mb 4
wait "$watcher"
[[ "$(ls "$WORK/late")" == "out.h5" && "$(cat "$WORK/late/out.h5")" == theirs ]] && ok "no temporaries left, their file intact" \
  || bad "after the late failure: $(ls "$WORK/late")"
finish
