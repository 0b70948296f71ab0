# Training on rows packed from whole documents (`prep lm --packing bfd`, Note [Packed attention]) under mpirun: one
# SGD step on the packed rows of a split equals one on the same documents unpacked (`--packing none`, one row each)
# — GPT-2 on 2 ranks x accumulation 2 against 1 rank, Llama with grouped-query attention under gradient
# checkpointing and ZeRO stage 2, LoRA adapters — so positions restart, attention stops at every boundary and no document's
# first token is a target (the token count is exact); a packed run resumes exactly; `eval --json` gives the packed and
# the unpacked validation split the same loss and tokens; and (with HPCTRAIN_TRANSFORMERS_PYTHON, a python with
# transformers) transformers given the packed rows with position_ids restarting per document and a block-diagonal
# causal 4D mask computes that loss too.
source "$(dirname "$0")/lib.sh"
make_lm_fixture  # docs.jsonl (98 documents), gpt2.json, llama.json
for packing in bfd none; do
  "$HPCTRAIN" prep lm --no-progress --input "$WORK/docs.jsonl" --text-field text --tokenizer "$BPE" --max-length 64 \
    --validation-fraction 0.2 --seed 4 --packing $packing --output "$WORK/$packing.h5" >"$WORK/prep-$packing.log" 2>&1 \
    || { cat "$WORK/prep-$packing.log"; exit 1; }
done
# The rows of each train split: the whole split is one global batch below.
read -r ROWS DOCS < <("$PY" -c "import h5py, sys
print(*(h5py.File(p, 'r')['train'].attrs['num_examples'] for p in sys.argv[1:]))" "$WORK/bfd.h5" "$WORK/none.h5")
[[ $ROWS -lt $DOCS ]] && ok "bfd: $DOCS documents in $ROWS rows" || bad "bfd rows: $ROWS for $DOCS documents"
lm_args() {  # lm_args DATA OUTPUT: SGD, constant learning rate, no clipping, no evaluation
  echo --data "$WORK/$1.h5" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 --no-progress --logging-steps 1 \
    --optim sgd --lr 0.5 --lr-scheduler constant --max-grad-norm 0 --eval-steps 1000
}
W=model.safetensors
gpt2=(--model-config "$WORK/gpt2.json")
llama=(--model-config "$WORK/llama.json")

# --- GPT-2: one step over the whole split, packed on 2 ranks x accumulation 2 == unpacked on 1 rank -----------
run_ok "gpt2 unpacked: 1 rank, the split in one step" "$WORK/u.log" mpi 1 train $(lm_args none u) "${gpt2[@]}" \
  --max-steps 1 --batch-size "$DOCS"
half=$(( (ROWS + 3) / 4 ))
run_ok "gpt2 packed: 2 ranks x $half x accumulation 2, 2 steps" "$WORK/p.log" mpi 2 train $(lm_args bfd p) "${gpt2[@]}" \
  --max-steps 2 --batch-size "$half" --gradient-accumulation-steps 2 --save-steps 1
compare "$WORK/u/final/$W" "$WORK/p/checkpoint-1/$W" 1e-5 && ok "gpt2: packed step == unpacked step (1e-5)" \
  || bad "gpt2: packed vs unpacked step"
# Resume step 2 from the checkpoint of step 1: the same weights as straight through.
mkdir -p "$WORK/r" && cp -r "$WORK/p/checkpoint-1" "$WORK/r/"
run_ok "gpt2 packed: resume from step 1" "$WORK/r.log" mpi 2 train $(lm_args bfd r) "${gpt2[@]}" \
  --max-steps 2 --batch-size "$half" --gradient-accumulation-steps 2 --resume auto
compare "$WORK/p/final/$W" "$WORK/r/final/$W" 1e-6 && ok "gpt2 packed: resumed == straight through (1e-6)" \
  || bad "gpt2 packed: resume"

# --- LoRA on the step-1 GPT-2 (c_attn adapted): the adapters' step, packed == unpacked ---------------------------
lora=(--model "$WORK/u/final" --lora-r 4 --lora-alpha 8 --lora-target-modules c_attn --max-steps 1)
run_ok "gpt2 LoRA unpacked: 1 rank" "$WORK/lu.log" mpi 1 train $(lm_args none lora-u) "${lora[@]}" --batch-size "$DOCS"
run_ok "gpt2 LoRA packed: 2 ranks" "$WORK/lpk.log" mpi 2 train $(lm_args bfd lora-p) "${lora[@]}" \
  --batch-size $(( (ROWS + 1) / 2 ))
compare "$WORK/lora-u/final/adapter_model.safetensors" "$WORK/lora-p/final/adapter_model.safetensors" 1e-5 \
  && ok "LoRA: packed step == unpacked step (1e-5)" || bad "LoRA: packed vs unpacked step"

# --- Llama (GQA, RoPE): gradient checkpointing and ZeRO stage 2 on the packed side ------------------------------
run_ok "llama unpacked: 1 rank" "$WORK/llu.log" mpi 1 train $(lm_args none lu) "${llama[@]}" --max-steps 1 --batch-size "$DOCS"
run_ok "llama packed: 2 ranks, checkpointing, ZeRO 2" "$WORK/lp.log" mpi 2 train $(lm_args bfd lp) "${llama[@]}" --max-steps 1 \
  --batch-size $(( (ROWS + 1) / 2 )) --gradient-checkpointing --zero-stage 2
compare "$WORK/lu/final/$W" "$WORK/lp/final/$W" 1e-5 && ok "llama: packed step == unpacked step (1e-5)" \
  || bad "llama: packed vs unpacked step"

# --- eval: the packed and the unpacked validation split, the same documents: the same loss and tokens ----------
for packing in bfd none; do
  run_ok "eval --json on the $packing split" "$WORK/e-$packing.log" mpi 1 eval --model "$WORK/p/final" \
    --data "$WORK/$packing.h5" --split validation --batch-size 3 --threads 1 --json
  sed -n '/^{/,/^}/p' "$WORK/e-$packing.log" >"$WORK/e-$packing.json"
done
"$PY" - "$WORK/e-bfd.json" "$WORK/e-none.json" "$WORK/none.h5" <<'PYEOF' && ok "eval: packed == unpacked (1e-6), tokens token-exact" \
  || bad "eval on packed rows"
import h5py, json, sys
packed, unpacked = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
offsets = h5py.File(sys.argv[3], "r")["validation/offsets"][:]
tokens = int(sum(n - 1 for n in offsets[1:] - offsets[:-1]))  # each document predicts all but its first token
print(packed, unpacked, tokens)
ok = packed["tokens"] == unpacked["tokens"] == tokens
sys.exit(0 if ok and abs(packed["loss"] - unpacked["loss"]) <= 1e-6 * max(1, unpacked["loss"]) else 1)
PYEOF
if [[ -n "${HPCTRAIN_TRANSFORMERS_PYTHON:-}" ]]; then
  "$HPCTRAIN_TRANSFORMERS_PYTHON" - "$WORK/p/final" "$WORK/bfd.h5" "$WORK/e-bfd.json" <<'PYEOF' \
    && ok "transformers with position_ids and a block-diagonal 4D mask gives eval's loss (1e-5)" \
    || bad "transformers' loss on packed rows"
import h5py, json, sys, torch, numpy as np
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], attn_implementation="eager").eval()
split = h5py.File(sys.argv[2], "r")["validation"]
ids, offsets, starts = split["input_ids"][:], split["offsets"][:], split["document_start"][:].astype(np.int64)
total, count = 0.0, 0
with torch.no_grad():
    for b, e in zip(offsets[:-1], offsets[1:]):
        x = torch.tensor(ids[b:e].astype(np.int64))[None]
        document = torch.tensor(np.cumsum(starts[b:e]))                      # 1, 1, 2, 2, 2, 3, ...
        first = torch.tensor(np.flatnonzero(starts[b:e]))
        positions = torch.arange(e - b) - first[document - 1]                 # restart at every document
        visible = (document[:, None] == document[None, :]) & torch.ones(e - b, e - b, dtype=torch.bool).tril()
        mask = torch.zeros(1, 1, e - b, e - b).masked_fill(~visible, torch.finfo(torch.float32).min)
        labels = x.clone()
        labels[0, torch.tensor(starts[b:e]).bool()] = -100                   # no document's first token is a target
        out = model(input_ids=x, position_ids=positions[None], attention_mask=mask, labels=labels)
        n = int((labels[0, 1:] != -100).sum())
        total += out.loss.item() * n; count += n
ours = json.load(open(sys.argv[3]))
print("transformers", total / count, count, "hpctrain", ours["loss"], ours["tokens"])
sys.exit(0 if count == ours["tokens"] and abs(total / count - ours["loss"]) <= 1e-5 * max(1, ours["loss"]) else 1)
PYEOF
else
  echo "skip: transformers' loss on packed rows (set HPCTRAIN_TRANSFORMERS_PYTHON to a python with transformers)"
fi
finish
