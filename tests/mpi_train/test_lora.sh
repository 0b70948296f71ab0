# LoRA (Note [LoRA] in include/hpctrain/models/lora.hpp) on 2 ranks: only the adapters and the modules to save
# train (the base in final-merged/ is untouched outside the targets; the optimizer state and comm_bytes are a
# fraction of full fine-tuning's); 1 rank x 8 == 2 ranks x 4; exact resume from an adapter-only checkpoint, refused
# against another base; --merge-lora == base + B·A·alpha/r (checked here in numpy, Conv1D transposed for GPT-2) and
# `eval|predict|generate --adapter` == the same with the merged folder; an unknown target module lists the model's
# linear modules; LoRA options without --lora-r are refused; a base with another label count than the adapter's head
# (Note [Adapter labels]); fan_in_fan_out true for GPT-2's Conv1D targets; MFU's FLOPs under LoRA (Note [Model FLOPs]).
source "$(dirname "$0")/lib.sh"
make_fixture 0.0
make_lm_fixture

# Bases: a short full fine-tuning run's final/ (a transformers folder), a second one from another seed.
run_ok "base model" "$WORK/base.log" mpi 1 train $(train_args "$WORK/base-run") --max-steps 2 --batch-size 8
run_ok "another base model" "$WORK/base2.log" mpi 1 train $(train_args "$WORK/base2-run") --max-steps 2 --batch-size 8 \
  --seed 9
BASE=$WORK/base-run/final BASE2=$WORK/base2-run/final

# lora_args OUTPUT [BASE]: a LoRA run on the classification fixture (r 4, alpha 8: scaling 2).
lora_args() {
  echo --model "${2:-$BASE}" --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$1" --threads 1 --device cpu \
    --no-progress --logging-steps 1 --lr 5e-3 --shuffle global --lora-r 4 --lora-alpha 8 --eval-steps 100
}
common=(--max-steps 6 --save-steps 3)
run_ok "LoRA, 1 rank x 8" "$WORK/one.log" mpi 1 train $(lora_args "$WORK/one") "${common[@]}" --batch-size 8
run_ok "LoRA, 2 ranks x 4, --merge-lora" "$WORK/two.log" mpi 2 train $(lora_args "$WORK/two") "${common[@]}" \
  --batch-size 4 --merge-lora
run_ok "full fine-tuning, 2 ranks x 4" "$WORK/full.log" mpi 2 train --model "$BASE" --data "$WORK/data.h5" \
  --tokenizer "$WORK/tok" --output "$WORK/full" --threads 1 --device cpu --no-progress --logging-steps 1 --lr 5e-3 \
  --shuffle global --eval-steps 100 "${common[@]}" --batch-size 4
grep -q "LoRA: adapters on 4 layers, modules to save: pre_classifier, classifier" "$WORK/two.log" \
  && ok "q_lin, v_lin adapted; PEFT's modules to save (its suffix rule takes pre_classifier too)" \
  || { bad "LoRA layout line"; grep -i lora "$WORK/two.log"; }

A=final/adapter_model.safetensors
compare "$WORK/one/$A" "$WORK/two/$A" 1e-5 && ok "1 rank x 8 == 2 ranks x 4 (adapter, rel. diff <= 1e-5)" \
  || bad "1 vs 2 ranks: adapters differ"

# The files: PEFT's names and config, adapter-only checkpoints; the adapter moved away from its zero init.
"$PY" - "$WORK/two" "$HERE" <<'PYEOF' && ok "final/ and checkpoints in PEFT's format, adapter only" || bad "adapter files"
import json, os, sys
sys.path.insert(0, sys.argv[2])
from compare_weights import read
out = sys.argv[1]
config = json.load(open(f"{out}/final/adapter_config.json"))
expect = {"peft_type": "LORA", "task_type": "SEQ_CLS", "r": 4, "lora_alpha": 8, "bias": "none",
          "target_modules": ["q_lin", "v_lin"], "modules_to_save": ["classifier", "score"], "fan_in_fan_out": False}
assert all(config[k] == v for k, v in expect.items()), config
meta, tensors = read(f"{out}/final/adapter_model.safetensors")
names = sorted(tensors)
assert meta == {"format": "pt"} and all(n.startswith("base_model.model.") for n in names), names
assert {n for n in names if "lora_" not in n} == {f"base_model.model.{m}.{p}" for m in ("classifier", "pre_classifier")
                                                   for p in ("weight", "bias")}, names
assert len([n for n in names if "lora_" in n]) == 8, names
assert all(abs(t).max() > 0 for n, t in tensors.items() if "lora_B" in n), "lora_B did not train"
files = set(os.listdir(f"{out}/checkpoint-3"))
assert {"adapter_model.safetensors", "lora_base.json", "optimizer.safetensors"} <= files and "model.safetensors" not in files, files
_, state = read(f"{out}/checkpoint-3/optimizer.safetensors")
assert all("lora_" in n or "classifier" in n or n == "step" for n in state), sorted(state)
PYEOF

# Only the trainable tensors are reduced and hold optimizer state: a fraction of full fine-tuning's.
"$PY" - "$WORK/two" "$WORK/full" <<'PYEOF' && ok "comm_bytes and optimizer state under 15 % of full fine-tuning's" || bad "comm/optimizer sizes"
import json, os, sys
def comm(run):
    return sum(e["comm_bytes"] for e in map(json.loads, open(f"{run}/metrics.jsonl")) if "comm_bytes" in e and "loss" in e)
lora, full = comm(sys.argv[1]), comm(sys.argv[2])
state = [os.path.getsize(f"{run}/checkpoint-3/optimizer.safetensors") for run in sys.argv[1:]]
print("comm_bytes", lora, full, "optimizer.safetensors", state)
sys.exit(0 if lora < 0.15 * full and state[0] < 0.15 * state[1] else 1)
PYEOF

# --merge-lora: final-merged = base + B·A·alpha/r on the targets, the modules to save from the adapter, the rest
# the base's bit for bit.
check_merge() {  # check_merge RUN BASE CONV1D(0|1)
  "$PY" - "$@" "$HERE" <<'PYEOF'
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[4])
from compare_weights import read
run, base_dir, conv1d = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
_, base = read(f"{base_dir}/model.safetensors")
_, merged = read(f"{run}/final-merged/model.safetensors")
_, adapter = read(f"{run}/final/adapter_model.safetensors")
config = json.load(open(f"{run}/final/adapter_config.json"))
scaling = config["lora_alpha"] / config["r"]
adapter = {k[len("base_model.model."):]: v for k, v in adapter.items()}
assert sorted(merged) == sorted(base), set(merged) ^ set(base)
checked = 0
for name, weight in base.items():
    module = name.rsplit(".", 1)[0]
    if f"{module}.lora_A.weight" in adapter and name.endswith(".weight"):
        delta = (adapter[f"{module}.lora_B.weight"].astype(np.float64) @ adapter[f"{module}.lora_A.weight"]) * scaling
        expect = weight + (delta.T if conv1d else delta)
        assert np.abs(delta).max() > 0, name
        checked += 1
    else:
        expect = adapter.get(name, weight)  # frozen: the base's bits; a module to save: the adapter's
        assert np.array_equal(merged[name], expect), name
    assert np.allclose(merged[name], expect, rtol=0, atol=1e-6), (name, np.abs(merged[name] - expect).max())
print("merged targets checked:", checked)
sys.exit(0 if checked > 0 else 1)
PYEOF
}
check_merge "$WORK/two" "$BASE" 0 && ok "final-merged == base + B·A·alpha/r (others: the base's, heads: the adapter's)" \
  || bad "merged weights"

# eval of the merged folder == eval of base + adapter.
mpi 2 eval --model "$WORK/two/final-merged" --data "$WORK/data.h5" --threads 1 --device cpu --json >"$WORK/eval-merged.json" 2>"$WORK/eval-merged.log"
mpi 2 eval --model "$BASE" --adapter "$WORK/two/final" --data "$WORK/data.h5" --threads 1 --device cpu --json \
  >"$WORK/eval-adapter.json" 2>"$WORK/eval-adapter.log"
mpi 2 eval --model "$BASE" --data "$WORK/data.h5" --threads 1 --device cpu --json >"$WORK/eval-base.json" 2>/dev/null
"$PY" - "$WORK/eval-merged.json" "$WORK/eval-adapter.json" "$WORK/eval-base.json" <<'PYEOF' && ok "eval --adapter == eval of final-merged (and != the base's)" || { bad "eval merged vs adapter"; tail -5 "$WORK/eval-adapter.log"; }
import json, sys
merged, adapter, base = (json.load(open(p))["loss"] for p in sys.argv[1:])
print("eval loss: merged", merged, "base + adapter", adapter, "base", base)
sys.exit(0 if abs(merged - adapter) <= 1e-6 * abs(merged) and abs(adapter - base) > 1e-5 else 1)
PYEOF

# Exact resume: 8 steps straight == 4 steps, then --resume auto to 8 (adapter-only checkpoint-4).
exact=(--batch-size 4 --save-steps 4 --lr-scheduler constant)
run_ok "resume: uninterrupted, 8 steps" "$WORK/whole.log" mpi 2 train $(lora_args "$WORK/whole") "${exact[@]}" --max-steps 8
run_ok "resume: first 4 steps" "$WORK/pa.log" mpi 2 train $(lora_args "$WORK/pieces") "${exact[@]}" --max-steps 4
cp -r "$WORK/pieces" "$WORK/other"
run_ok "resume: --resume auto to 8" "$WORK/pb.log" mpi 2 train $(lora_args "$WORK/pieces") "${exact[@]}" --max-steps 8 \
  --resume auto
grep -q "resuming at step 4" "$WORK/pb.log" && ok "resumed from checkpoint-4" || { bad "resume point"; head -20 "$WORK/pb.log"; }
compare "$WORK/whole/$A" "$WORK/pieces/$A" 0 && ok "resumed adapter == uninterrupted adapter (bitwise)" \
  || bad "resumed adapter differs"
compare "$WORK/whole/checkpoint-8/optimizer.safetensors" "$WORK/pieces/checkpoint-8/optimizer.safetensors" 0 \
  && ok "optimizer states equal" || bad "optimizer states differ"

# A resume against another base is refused, naming both.
if mpi 2 train $(lora_args "$WORK/other" "$BASE2") "${exact[@]}" --max-steps 8 --resume auto >"$WORK/other.log" 2>&1; then
  bad "resume on another base was accepted"
else
  grep -q "is an adapter of the base '$BASE'.*but --model '$BASE2'" "$WORK/other.log" \
    && ok "resume on another base refused, naming both" || { bad "another-base message"; tail -5 "$WORK/other.log"; }
fi

# An unknown target module: the model's linear module names listed.
if mpi 1 train $(lora_args "$WORK/unknown") --max-steps 1 --lora-target-modules q_lin,query >"$WORK/unknown.log" 2>&1; then
  bad "an unknown target module was accepted"
else
  grep -q "'query' names no linear module of DistilBertForSequenceClassification; its linear modules are: q_lin, k_lin, v_lin, out_lin, lin1, lin2, pre_classifier, classifier" \
    "$WORK/unknown.log" && ok "unknown target module: Error lists the linear modules" || { bad "unknown target message"; tail -3 "$WORK/unknown.log"; }
fi

# Causal LMs: GPT-2 (Conv1D, PEFT's fan_in_fan_out) with bf16 autocast and gradient checkpointing, merged; Llama
# with all-linear (no lm_head) and SGD. Base from a short full run on the packed LM fixture.
lm_args() {  # lm_args OUTPUT CONFIG
  echo --data "$WORK/packed.h5" --tokenizer "$BPE" --output "$1" --threads 1 --device cpu --no-progress \
    --logging-steps 1 --lr 5e-3 --batch-size 4 --max-steps 3 --eval-steps 100 --peak-tflops 1
}
run_ok "GPT-2 base" "$WORK/g-base.log" mpi 1 train $(lm_args "$WORK/g-base") --model-config "$WORK/gpt2.json"
run_ok "GPT-2 LoRA on c_attn, bf16, gradient checkpointing, --merge-lora" "$WORK/g.log" mpi 2 train \
  $(lm_args "$WORK/g") --model "$WORK/g-base/final" --lora-r 4 --lora-alpha 16 --lora-target-modules c_attn \
  --mixed-precision bf16 --gradient-checkpointing --merge-lora
check_merge "$WORK/g" "$WORK/g-base/final" 1 && ok "GPT-2: final-merged == base + (B·A)^T·alpha/r (Conv1D)" \
  || bad "GPT-2 merged weights"
# Note [Model FLOPs]: MFU's FLOPs per token (mfu x peak / tokens/s, --peak-tflops 1) are 6 N + attention for the full
# run, 4 N + 6 x adapters + attention for LoRA (no weight gradients for the frozen base).
"$PY" - "$WORK/g-base" "$WORK/g" "$WORK/gpt2.json" <<'PYEOF' && ok "MFU's FLOPs: 6 N full, 4 N + 6 x adapters under LoRA" \
  || bad "MFU FLOPs under LoRA"
import json, sys
c = json.load(open(sys.argv[3]))
d, L, V, T = c["n_embd"], c["n_layer"], c["vocab_size"], 16
N, attention, adapters = L * (4 * d * d + 2 * d * 4 * d) + V * d, 12 * L * d * T, L * 4 * (d + 3 * d)
def per_token(run, ranks):
    rows = [e for e in map(json.loads, open(f"{run}/metrics.jsonl")) if "mfu" in e]
    return [e["mfu"] * 1e12 * ranks / e["tokens_per_second"] for e in rows]
full, lora = per_token(sys.argv[1], 1), per_token(sys.argv[2], 2)
print("FLOPs per token: full", full[:1], "expected", 6 * N + attention, "LoRA", lora[:1], "expected", 4 * N + 6 * adapters + attention)
assert full and lora
assert all(abs(f / (6 * N + attention) - 1) < 1e-6 for f in full), full
assert all(abs(f / (4 * N + 6 * adapters + attention) - 1) < 1e-6 for f in lora), lora
PYEOF
"$PY" -c "import json, sys; c = json.load(open(sys.argv[1])); sys.exit(0 if c['fan_in_fan_out'] is True else 1)" \
  "$WORK/g/final/adapter_config.json" && ok "GPT-2 (Conv1D targets): adapter_config.json fan_in_fan_out true, as peft" \
  || bad "GPT-2 fan_in_fan_out"
# generate --adapter == generate with the merged folder (sampled: the logits decide every token).
gen=(--tokenizer "$BPE" --prompt "the sea and the sky" --max-new-tokens 12 --temperature 1.5 --seed 3 --json --threads 1)
"$HPCTRAIN" generate --model "$WORK/g/final-merged" "${gen[@]}" >"$WORK/gen-merged.json" 2>&1
"$HPCTRAIN" generate --model "$WORK/g-base/final" --adapter "$WORK/g/final" "${gen[@]}" >"$WORK/gen-adapter.json" 2>&1
grep -q new_ids "$WORK/gen-adapter.json" && cmp -s "$WORK/gen-merged.json" "$WORK/gen-adapter.json" \
  && ok "generate --adapter == generate with final-merged" || { bad "generate --adapter"; cat "$WORK/gen-adapter.json"; }
# predict --adapter == predict with the merged classifier folder.
mpi 2 predict --model "$WORK/two/final-merged" --data "$WORK/data.h5" --split validation --threads 1 --device cpu \
  --output "$WORK/pred-merged.jsonl" >/dev/null 2>&1
mpi 2 predict --model "$BASE" --adapter "$WORK/two/final" --data "$WORK/data.h5" --split validation --threads 1 \
  --device cpu --output "$WORK/pred-adapter.jsonl" >"$WORK/pred-adapter.log" 2>&1
[[ -s "$WORK/pred-adapter.jsonl" ]] && "$PY" - "$WORK/pred-merged.jsonl" "$WORK/pred-adapter.jsonl" <<'PYEOF' \
  && ok "predict --adapter == predict with final-merged" || { bad "predict --adapter"; tail -3 "$WORK/pred-adapter.log"; }
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
def close(x, y):
    if isinstance(x, float): return abs(x - y) <= 1e-5 * max(1.0, abs(x))
    if isinstance(x, list): return len(x) == len(y) and all(close(u, v) for u, v in zip(x, y))
    if isinstance(x, dict): return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
    return x == y
sys.exit(0 if len(a) == 21 and close(a, b) else 1)
PYEOF
# Note [Adapter labels]: a base saved with 2 labels (config.json without id2label, as a plain pretrained encoder,
# and a 2-row head) adapted on the 3-label data; eval|predict --model BASE --adapter take the labels from the
# adapter folder (lora_base.json), and from the saved head's size when the folder has no lora_base.json (peft's).
"$PY" - "$BASE" "$WORK/base-2" <<'PYEOF' || bad "2-label base"
import json, os, shutil, struct, sys
import numpy as np
src, dst = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
config = json.load(open(f"{src}/config.json"))
for key in ("id2label", "label2id", "num_labels"): config.pop(key, None)
json.dump(config, open(f"{dst}/config.json", "w"))
data = open(f"{src}/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", data[:8]); header = json.loads(data[8:8 + n]); header.pop("__metadata__", None)
tensors = {k: np.frombuffer(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32).reshape(v["shape"])
           for k, v in header.items()}
tensors = {k: (v[:2] if k.startswith("classifier.") else v) for k, v in tensors.items()}  # a 2-label head
out, offset, head = b"", 0, {"__metadata__": {"format": "pt"}}
for k, v in sorted(tensors.items()):
    raw = np.ascontiguousarray(v, np.float32).tobytes()
    head[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [offset, offset + len(raw)]}
    out, offset = out + raw, offset + len(raw)
h = json.dumps(head).encode(); h += b" " * (-len(h) % 8)
open(f"{dst}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + out)
PYEOF
run_ok "LoRA on a 2-label base, 3-label data, --merge-lora" "$WORK/two-lab.log" mpi 2 train \
  $(lora_args "$WORK/relabel" "$WORK/base-2") --max-steps 3 --batch-size 4 --merge-lora
mkdir -p "$WORK/peft-like" && cp "$WORK/relabel/final/adapter_"* "$WORK/peft-like/"  # no lora_base.json
ev=(--data "$WORK/data.h5" --threads 1 --device cpu)
mpi 2 eval --model "$WORK/relabel/final-merged" "${ev[@]}" --json >"$WORK/rl-merged.json" 2>/dev/null
mpi 2 predict --model "$WORK/relabel/final-merged" "${ev[@]}" --split validation --output "$WORK/rl-merged.jsonl" >/dev/null 2>&1
for adapter in relabel/final peft-like; do
  tag=${adapter//\//-}
  mpi 2 eval --model "$WORK/base-2" --adapter "$WORK/$adapter" "${ev[@]}" --json >"$WORK/rl-$tag.json" 2>"$WORK/rl-$tag.log"
  mpi 2 predict --model "$WORK/base-2" --adapter "$WORK/$adapter" "${ev[@]}" --split validation \
    --output "$WORK/rl-$tag.jsonl" >>"$WORK/rl-$tag.log" 2>&1
  "$PY" - "$WORK/rl-merged.json" "$WORK/rl-$tag.json" "$WORK/rl-merged.jsonl" "$WORK/rl-$tag.jsonl" <<'PYEOF' \
    && ok "2-label base + $adapter (3 labels): eval and predict --adapter == the merged folder's" \
    || { bad "2-label base + $adapter"; tail -3 "$WORK/rl-$tag.log"; }
import json, sys
merged, adapter = (json.load(open(p)) for p in sys.argv[1:3])
rows = [[json.loads(l) for l in open(p)] for p in sys.argv[3:5]]
print("eval loss: merged", merged["loss"], "base + adapter", adapter["loss"])
assert abs(merged["loss"] - adapter["loss"]) <= 1e-6 * abs(merged["loss"]), (merged, adapter)
assert merged.get("accuracy") == adapter.get("accuracy")
assert len(rows[0]) == 21 and len(rows[0]) == len(rows[1])
for a, b in zip(*rows):
    assert a.keys() == b.keys(), (a, b)
    assert len(a["logits"]) == 3 and all(abs(x - y) <= 1e-5 for x, y in zip(a["logits"], b["logits"])), (a, b)
    assert {k: v for k, v in a.items() if k != "logits"} == {k: v for k, v in b.items() if k != "logits"}, (a, b)
PYEOF
done
if mpi 1 train $(train_args "$WORK/no-r") --max-steps 1 --lora-target-modules q_lin >"$WORK/no-r.log" 2>&1; then
  bad "--lora-target-modules without --lora-r was accepted"
else
  grep -q "need --lora-r R" "$WORK/no-r.log" && ok "LoRA options without --lora-r refused" || { bad "no --lora-r message"; tail -3 "$WORK/no-r.log"; }
fi

run_ok "Llama base" "$WORK/l-base.log" mpi 1 train $(lm_args "$WORK/l-base") --model-config "$WORK/llama.json"
run_ok "Llama LoRA all-linear, SGD" "$WORK/l.log" mpi 2 train $(lm_args "$WORK/l") --model "$WORK/l-base/final" \
  --lora-r 2 --lora-target-modules all-linear --optim sgd
"$PY" - "$WORK/l/final" "$HERE" <<'PYEOF' && ok "Llama all-linear: 7 projections per layer adapted, lm_head not; CAUSAL_LM" || bad "Llama adapter"
import json, sys
sys.path.insert(0, sys.argv[2])
from compare_weights import read
config = json.load(open(f"{sys.argv[1]}/adapter_config.json"))
_, tensors = read(f"{sys.argv[1]}/adapter_model.safetensors")
targets = {n.split(".lora_")[0] for n in tensors}
print(config["task_type"], config["modules_to_save"], sorted(targets))
short = {t.rsplit(".", 1)[1] for t in targets}
sys.exit(0 if config["task_type"] == "CAUSAL_LM" and config["modules_to_save"] is None and len(targets) == 14 and
         short == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} and
         all("lora_" in n for n in tensors) else 1)
PYEOF
finish
