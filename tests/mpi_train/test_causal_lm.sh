# Causal-LM training under mpirun (issue 21, Note [Objectives]): the loss is the NLL summed over every predicted
# token of the global batch over their number, so 1 rank x batch 8, 2 ranks x batch 2 x accumulation 2 and 1 rank x
# batch 1 x accumulation 8 take the same steps — on rows of different lengths (--packing none, dynamic padding), where
# a per-micro-batch mean would not; 1 rank == 2 ranks for a Llama with grouped-query attention on packed rows; a run
# stopped on 2 ranks resumes exactly on 1; `eval --json` gives the same loss, perplexity and tokens on 1 and 2 ranks,
# the loss the training's last evaluation logged, and (with HPCTRAIN_TRANSFORMERS_PYTHON, a python with transformers)
# the loss transformers computes on final/; `predict` writes each row's loss; metrics.jsonl has tokens/s.
source "$(dirname "$0")/lib.sh"
make_lm_fixture  # docs.jsonl, packed.h5 (rows of 16 tokens), gpt2.json, llama.json
"$HPCTRAIN" prep lm --no-progress --input "$WORK/docs.jsonl" --text-field text --tokenizer "$BPE" \
  --validation-fraction 0.2 --seed 4 --packing none --max-length 24 --output "$WORK/ragged.h5" >"$WORK/prep1.log" 2>&1 \
  || { cat "$WORK/prep1.log"; exit 1; }
lm_args() {  # lm_args DATA CONFIG OUTPUT
  echo --data "$WORK/$1" --model-config "$WORK/$2" --tokenizer "$BPE" --output "$WORK/$3" --threads 1 --no-progress \
    --logging-steps 1 --lr 5e-3 --shuffle global --warmup-steps 1 --eval-steps 100
}
W=final/model.safetensors

# --- The three batch splittings on ragged rows -------------------------------------------------------------
run_ok "gpt2 ragged: 1 rank x 8" "$WORK/a.log" mpi 1 train $(lm_args ragged.h5 gpt2.json a) --max-steps 4 --batch-size 8
run_ok "gpt2 ragged: 2 ranks x 2 x accumulation 2" "$WORK/b.log" mpi 2 train $(lm_args ragged.h5 gpt2.json b) \
  --max-steps 4 --batch-size 2 --gradient-accumulation-steps 2
run_ok "gpt2 ragged: 1 rank x 1 x accumulation 8" "$WORK/c.log" mpi 1 train $(lm_args ragged.h5 gpt2.json c) \
  --max-steps 4 --batch-size 1 --gradient-accumulation-steps 8
compare "$WORK/a/$W" "$WORK/b/$W" 1e-5 && ok "1 x 8 == 2 x 2 x acc 2 (1e-5)" || bad "1 x 8 vs 2 x 2 x acc 2"
compare "$WORK/a/$W" "$WORK/c/$W" 1e-5 && ok "1 x 8 == 1 x 1 x acc 8 (1e-5)" || bad "1 x 8 vs 1 x 1 x acc 8"
grep -q "model: GPT2LMHeadModel ([0-9]* parameters, vocabulary 1500)" "$WORK/a.log" && ok "the model line names the vocabulary" \
  || { bad "model line"; grep "model:" "$WORK/a.log"; }
# Not vacuous: the rows differ in length within a batch, the loss moves, and the curves agree step by step.
"$PY" - "$WORK/ragged.h5" "$WORK/a/metrics.jsonl" "$WORK/b/metrics.jsonl" "$WORK/c/metrics.jsonl" <<'PYEOF' \
  && ok "ragged rows, the same moving loss curve, tokens/s logged" || bad "loss curves / tokens"
import h5py, json, sys
offsets = h5py.File(sys.argv[1], "r")["train/offsets"][:]
lengths = set((offsets[1:] - offsets[:-1]).tolist())
def lines(path):
    return [e for e in map(json.loads, open(path)) if "loss" in e]
curves = [[e["loss"] for e in lines(p)] for p in sys.argv[2:]]
for c in curves: print(c)
ok = len(lengths) > 3 and all(len(c) == 4 for c in curves) and max(curves[0]) - min(curves[0]) > 1e-3
ok = ok and all(abs(x - y) <= 1e-5 * max(1, abs(x)) for c in curves[1:] for x, y in zip(curves[0], c))
ok = ok and all(e.get("tokens_per_second", 0) > 0 for e in lines(sys.argv[2]))
print("row lengths", sorted(lengths)); sys.exit(0 if ok else 1)
PYEOF

# --- Llama (GQA, untied head) on packed rows: 1 rank == 2 ranks --------------------------------------------
run_ok "llama packed: 1 rank x 4" "$WORK/l1.log" mpi 1 train $(lm_args packed.h5 llama.json l1) --max-steps 4 --batch-size 4
run_ok "llama packed: 2 ranks x 2" "$WORK/l2.log" mpi 2 train $(lm_args packed.h5 llama.json l2) --max-steps 4 --batch-size 2
compare "$WORK/l1/$W" "$WORK/l2/$W" 1e-5 && ok "llama: 1 rank == 2 ranks (1e-5)" || bad "llama: 1 vs 2 ranks"

# --- Exact resume at another world size: 2 ranks stop at step 3, 1 rank (x 2 accumulation) finishes --------
exact=(--lr-scheduler constant --save-steps 3)
run_ok "resume: uninterrupted on 2 ranks" "$WORK/w.log" mpi 2 train $(lm_args ragged.h5 gpt2.json whole) "${exact[@]}" \
  --batch-size 2 --max-steps 6
run_ok "resume: 3 steps on 2 ranks" "$WORK/p1.log" mpi 2 train $(lm_args ragged.h5 gpt2.json pieces) "${exact[@]}" \
  --batch-size 2 --max-steps 3
run_ok "resume: on 1 rank x 2 accumulation" "$WORK/p2.log" mpi 1 train $(lm_args ragged.h5 gpt2.json pieces) "${exact[@]}" \
  --batch-size 2 --gradient-accumulation-steps 2 --max-steps 6 --resume auto
grep -q "resuming at step 3" "$WORK/p2.log" && ok "resumed at step 3" || { bad "resume point"; tail -20 "$WORK/p2.log"; }
compare "$WORK/whole/$W" "$WORK/pieces/$W" 1e-5 && ok "2 ranks -> 1 rank resume == uninterrupted (1e-5)" || bad "resume differs"

# --- eval on 1 and 2 ranks, the training's last evaluation, transformers --------------------------------------
for np in 1 2; do
  run_ok "eval --json on $np rank(s)" "$WORK/eval$np.log" mpi "$np" eval --model "$WORK/a/final" --data "$WORK/ragged.h5" \
    --split validation --batch-size 3 --threads 1 --json
  sed -n '/^{/,/^}/p' "$WORK/eval$np.log" >"$WORK/eval$np.json"
done
run_ok "predict --logits" "$WORK/pred.log" mpi 2 predict --model "$WORK/a/final" --data "$WORK/ragged.h5" --split validation \
  --batch-size 3 --threads 1 --output "$WORK/pred.jsonl" --logits
"$PY" - "$WORK/eval1.json" "$WORK/eval2.json" "$WORK/a/metrics.jsonl" "$WORK/pred.jsonl" "$WORK/ragged.h5" <<'PYEOF' \
  && ok "eval: 1 rank == 2 ranks == the last evaluation == predict's rows; tokens = the split's predicted tokens" \
  || bad "eval results"
import h5py, json, math, sys
one, two = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
logged = [e for e in map(json.loads, open(sys.argv[3])) if "eval_loss" in e][-1]
rows = [json.loads(l) for l in open(sys.argv[4])]
offsets = h5py.File(sys.argv[5], "r")["validation/offsets"][:]
tokens = int(sum(max(0, n - 1) for n in (offsets[1:] - offsets[:-1])))
print(one, two, logged["eval_loss"], len(rows), tokens)
close = lambda a, b: abs(a - b) <= 1e-6 * max(1, abs(a))
ok = set(one) >= {"loss", "perplexity", "tokens"} and one["tokens"] == two["tokens"] == tokens
ok = ok and close(one["loss"], two["loss"]) and close(one["loss"], logged["eval_loss"])
ok = ok and close(one["perplexity"], math.exp(one["loss"])) and len(rows) == len(offsets) - 1
ok = ok and [r["index"] for r in rows] == list(range(len(rows)))
ok = ok and close(sum(r["loss_sum"] for r in rows) / sum(r["tokens"] for r in rows), one["loss"])
ok = ok and all(len(r["logprobs"]) == r["tokens"] and abs(sum(r["logprobs"]) + r["loss_sum"]) <= 1e-6 * max(1, r["loss_sum"])
                for r in rows)  # predict --logits: each predicted token's log-probability
sys.exit(0 if ok else 1)
PYEOF
if [[ -n "${HPCTRAIN_TRANSFORMERS_PYTHON:-}" ]]; then
  "$HPCTRAIN_TRANSFORMERS_PYTHON" - "$WORK/a/final" "$WORK/ragged.h5" "$WORK/eval1.json" <<'PYEOF' \
    && ok "final/ loads in transformers and gives eval's loss" || bad "transformers' loss on final/"
import h5py, json, sys, torch, numpy as np
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
f = h5py.File(sys.argv[2], "r")
ids, offsets = f["validation/input_ids"][:], f["validation/offsets"][:]
total, count = 0.0, 0
with torch.no_grad():
    for b, e in zip(offsets[:-1], offsets[1:]):
        x = torch.tensor(ids[b:e].astype(np.int64))[None]
        if x.shape[1] < 2: continue
        total += model(input_ids=x, labels=x).loss.item() * (x.shape[1] - 1); count += x.shape[1] - 1
ours = json.load(open(sys.argv[3]))["loss"]
print("transformers", total / count, "hpctrain", ours)
sys.exit(0 if abs(total / count - ours) <= 1e-5 * max(1, ours) else 1)
PYEOF
  "$HPCTRAIN_TRANSFORMERS_PYTHON" - "$WORK/a/final" "$WORK/ragged.h5" "$WORK/pred.jsonl" <<'PYEOF' \
    && ok "predict --logits: each token's log-probability = transformers' (1e-4)" || bad "predict --logits vs transformers"
import h5py, json, sys, torch, numpy as np
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1]).eval()
f = h5py.File(sys.argv[2], "r")
ids, offsets = f["validation/input_ids"][:], f["validation/offsets"][:]
rows = [json.loads(l) for l in open(sys.argv[3])]
worst = 0.0
with torch.no_grad():
    for row, (b, e) in zip(rows, zip(offsets[:-1], offsets[1:])):
        x = torch.tensor(ids[b:e].astype(np.int64))[None]
        theirs = torch.log_softmax(model(input_ids=x).logits[0, :-1].double(), -1).gather(-1, x[0, 1:, None])[:, 0]
        assert len(row["logprobs"]) == len(theirs), (len(row["logprobs"]), len(theirs))
        worst = max([worst] + [abs(a - b) for a, b in zip(row["logprobs"], theirs.tolist())])
print("max |logprob - transformers'|", worst)
sys.exit(0 if worst <= 1e-4 else 1)
PYEOF
else
  echo "skip: transformers' loss on final/ (set HPCTRAIN_TRANSFORMERS_PYTHON to a python with transformers)"
fi
finish
