# Acceptance 1: `mpirun -np 2 hpctrain train --model-config C.json --data X.h5 --output runs/x --epochs 1`
# trains, evaluates and checkpoints; runs/x/final has Hugging Face's layout and works with `hpctrain predict`.
source "$(dirname "$0")/lib.sh"
make_fixture 0.1
out="$WORK/runs/x"
printf 'batch-size = 4\nsave-total-limit = 1\n' >"$WORK/train.cfg"  # the same keys as the flags
run_ok "train 1 epoch on 2 ranks" "$WORK/train.log" mpi 2 train $(train_args "$out") --epochs 1 --config "$WORK/train.cfg"
grep -q "global batch 8 = 4 per rank x 2 rank(s)" "$WORK/train.log" && ok "--config file read" || bad "--config not applied"
grep -Eq "validation: accuracy [0-9.]+ \(majority-class baseline 0\.3[0-9]+\)" "$WORK/train.log" \
  && ok "summary: accuracy next to the majority baseline" || { bad "summary line"; tail -5 "$WORK/train.log"; }
[[ $(grep -c "validation: accuracy" "$WORK/train.log") -eq 1 ]] && ok "rank 0 logs alone" || bad "duplicate log lines"
# 79 examples on 2 ranks: 40 per rank (one padding duplicate), 10 steps of 4 per rank.
[[ -d "$out/checkpoint-10" && $(ls -d "$out"/checkpoint-* | wc -l) -eq 1 ]] && ok "checkpoint-10 only (--save-total-limit 1)" \
  || { bad "checkpoints"; ls "$out"; }
for f in config.json model.safetensors vocab.txt tokenizer_config.json; do
  [[ -f "$out/final/$f" ]] && ok "final/$f" || bad "final/$f missing"
done
"$PY" - "$out/final" "$HERE/compare_weights.py" <<'PYEOF' && ok "final/ has Hugging Face's config keys and tensor names" || bad "HF layout"
import json, subprocess, sys
final = sys.argv[1]
config = json.load(open(final + "/config.json"))
assert config["model_type"] == "distilbert", config
assert config["architectures"] == ["DistilBertForSequenceClassification"], config
assert config["id2label"] == {"0": "blue", "1": "green", "2": "red"}, config["id2label"]
assert config["label2id"] == {"blue": 0, "green": 1, "red": 2}, config["label2id"]
for key in ["dim", "n_layers", "n_heads", "hidden_dim", "vocab_size", "max_position_embeddings", "torch_dtype"]:
    assert key in config, key
layout = json.loads(subprocess.check_output([sys.executable, sys.argv[2], "--layout", final + "/model.safetensors"]))
assert layout["metadata"] == {"format": "pt"}, layout["metadata"]
names = set(layout["names"])
for name in ["distilbert.embeddings.word_embeddings.weight", "distilbert.embeddings.position_embeddings.weight",
             "distilbert.transformer.layer.1.attention.q_lin.weight", "distilbert.transformer.layer.0.ffn.lin2.bias",
             "distilbert.transformer.layer.0.output_layer_norm.weight", "pre_classifier.weight", "classifier.bias"]:
    assert name in names, name
print(len(names), "tensors")
PYEOF
grep -q '"time":{' "$out/metrics.jsonl" && grep -q '"exposed_communication"' "$out/metrics.jsonl" \
  && ok "metrics.jsonl with the time breakdown" || bad "metrics.jsonl"
run_ok "hpctrain predict on final/" "$WORK/predict.log" mpi 2 predict --model "$out/final" --data "$WORK/data.h5" \
  --split validation --output "$WORK/preds.jsonl"
[[ $(wc -l <"$WORK/preds.jsonl") -eq $VAL_N ]] && ok "$VAL_N predictions, one per validation example" || bad "prediction count"
run_ok "hpctrain eval on final/" "$WORK/eval.log" mpi 1 eval --model "$out/final" --data "$WORK/data.h5"
finish
