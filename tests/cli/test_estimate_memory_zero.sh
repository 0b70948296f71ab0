# `hpctrain estimate-memory --zero-stage S --world-size N` (Note [ZeRO memory arithmetic]): stage 0 prints what it
# printed before whatever N; stages 1 and 2 at N = 2 and 4 follow the per-parameter formula (optimizer state about
# stage 0's / N, stage 1's extra reduced slices and stage 2's gradients about 4 / N bytes per parameter, stage 2's
# buckets in flight bounded by the two largest buckets, both stages the end of backward's transients beyond the
# activations), 8-bit AdamW's share too; clear errors for bad options. The comparison with the measured step on 2 ranks: tests/mpi_train/test_zero_memory.sh.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
# The DistilBERT-style benchmark model (bench/models): 11.2 M parameters, its word embeddings (31.3 MB) a bucket of
# their own; and an 8-layer model (41 M parameters, 7 buckets), where stage 2's buckets in flight are a
# fraction of the gradients.
cp "$REPO/bench/predict/distilbert-bench.json" "$WORK/small.json"
cat >"$WORK/large.json" <<'JSON'
{"model_type": "distilbert", "architectures": ["DistilBertForSequenceClassification"], "dim": 512, "n_layers": 8,
 "n_heads": 8, "hidden_dim": 2048, "vocab_size": 30522, "max_position_embeddings": 512,
 "id2label": {"0": "a", "1": "b"}, "label2id": {"a": 0, "b": 1}}
JSON
estimate() { "$HPCTRAIN" estimate-memory --batch-size 4 --sequence-length 64 "$@"; }

estimate --model-config "$WORK/small.json" >"$WORK/plain.txt" 2>&1 && estimate --model-config "$WORK/small.json" --json \
  >"$WORK/plain.json" 2>&1 || bad "stage 0 runs"
estimate --model-config "$WORK/small.json" --zero-stage 0 --world-size 4 >"$WORK/s0.txt" 2>&1
estimate --model-config "$WORK/small.json" --zero-stage 0 --world-size 4 --json >"$WORK/s0.json" 2>&1
cmp -s "$WORK/plain.txt" "$WORK/s0.txt" && cmp -s "$WORK/plain.json" "$WORK/s0.json" \
  && ok "--zero-stage 0 --world-size 4: the table and JSON of stage 0 unchanged" || { bad "stage 0 changed"; cat "$WORK/s0.txt"; }

# The small model: both optimizers, stages 1 and 2 at N = 1, 2, 4 and stage 0; the large one: AdamW at N = 2, 4.
runs=()
for optim in adamw adamw_8bit; do
  runs+=("small $optim 0 1" "small $optim 0 2")
  for stage in 1 2; do for n in 1 2 4; do runs+=("small $optim $stage $n"); done; done
done
runs+=("large adamw 0 1" "large adamw 1 2" "large adamw 2 2" "large adamw 1 4" "large adamw 2 4")
for run in "${runs[@]}"; do
  read -r model optim stage n <<<"$run"
  estimate --model-config "$WORK/$model.json" --optim "$optim" --zero-stage "$stage" --world-size "$n" --json \
    >"$WORK/$model-$optim-$stage-$n.json" 2>"$WORK/err" || { bad "$model $optim stage $stage N $n"; cat "$WORK/err"; }
done
estimate --model-config "$WORK/small.json" --zero-stage 2 --world-size 2 >"$WORK/s2.txt" 2>&1
for row in "ZeRO stage 2 over 2 rank(s)" "gradients (rank's slices)" "buckets in flight (extra)" "optimizer state (share)"; do
  grep -qF "$row" "$WORK/s2.txt" && ok "stage 2 table row '$row'" || { bad "stage 2 table row '$row'"; cat "$WORK/s2.txt"; }
done

"$PY" - "$WORK" <<'PYEOF' && ok "stages 1 and 2 at N = 2, 4 follow the per-parameter formula" || bad "ZeRO arithmetic"
import json, sys
work = sys.argv[1]
def load(model, optim, stage, n):
    return json.load(open(f"{work}/{model}-{optim}-{stage}-{n}.json"))
def near(got, want, rel, label):  # padding: at most a few KiB per bucket
    print(f"{label}: {got} vs {want:.0f} ({(got - want) / want:+.5%})")
    assert want <= got <= want * (1 + rel) + 64 * 1024, label
for model, optim in (("small", "adamw"), ("small", "adamw_8bit"), ("large", "adamw")):
    base = load(model, optim, 0, 1)
    b0, p = base["bytes"], base["parameter_count"]
    if model == "small":
        for stage in (1, 2):
            assert load(model, optim, stage, 1)["bytes"] == b0, f"{optim} stage {stage} on 1 rank shards nothing"
    for n in (2, 4):
        if model == "small" and n == 2:
            assert load(model, optim, 0, n)["bytes"] == b0, "stage 0 does not depend on N"
        s1, s2 = load(model, optim, 1, n), load(model, optim, 2, n)
        label = f"{model} {optim} N={n}"
        assert s1["zero_stage"] == 1 and s1["world_size"] == n and s2["zero_stage"] == 2
        for s in (s1, s2):
            b = s["bytes"]
            assert b["parameters"] == 4 * p and b["activations"] == b0["activations"]
            assert b["total"] == sum(b[k] for k in ("parameters", "gradients", "reducer_buckets", "optimizer_state",
                                                    "activations"))
            near(b["optimizer_state"], b0["optimizer_state"] / n, 1e-3, f"{label} stage {s['zero_stage']} state")
        near(s1["bytes"]["gradients"], 4 * p, 1e-3, f"{label} stage 1 gradients (full buckets)")
        # The end of backward (the word embeddings, the largest parameter and bucket, reduced last): autograd's
        # embedding gradient + the reduce-scatter's scratch (+ stage 2's buckets in flight), counted only beyond
        # the activation peak (Note [ZeRO memory arithmetic])
        embeddings = 30522 * (256 if model == "small" else 512) * 4
        act = b0["activations"]
        beyond1 = max(0, 2 * embeddings - act)
        near(s1["bytes"]["reducer_buckets"] - beyond1, 4 * p / n, 1e-3, f"{label} stage 1 reduced slices")
        near(s2["bytes"]["gradients"], 4 * p / n, 1e-3, f"{label} stage 2 gradients (slices)")
        # stage 2's buckets in flight: at least the largest bucket (the word embeddings' gradient), at most all
        pool = s2["bytes"]["reducer_buckets"] + act - 2 * embeddings
        assert s2["bytes"]["reducer_buckets"] > 0 and embeddings <= pool <= 4 * p * 1.001, (label, pool)
        if model == "large":  # 7 buckets: two of them are a fraction of the gradients
            assert pool < 0.6 * 4 * p, (label, pool)
            assert s2["bytes"]["total"] < b0["total"], label
        # AdamW: stage 1 saves 8 (1 - 1/N) bytes per parameter of state and adds 4/N of reduced slices. 8-bit
        # AdamW's state is about 2 bytes per parameter: at N = 2 its stage 1 saves 1 and adds 2 (more than stage 0).
        if optim == "adamw_8bit" and n == 2:
            assert s1["bytes"]["total"] > b0["total"], label
        if optim == "adamw":  # DeepSpeed's arithmetic plus the reduced slices: 4 + 4 + 4/N + 8/N per parameter
            # plus the end of backward's transients: on the small model at N = 2 (its embeddings 70 % of the
            # parameters, one bucket) they outweigh the 4 bytes per parameter saved, as the measured step shows
            assert (s1["bytes"]["total"] < b0["total"]) == (model == "large" or n == 4), label
            per_parameter = (s1["bytes"]["parameters"] + s1["bytes"]["gradients"] + s1["bytes"]["reducer_buckets"]
                             - beyond1 + s1["bytes"]["optimizer_state"]) / p
            assert abs(per_parameter - (8 + 12 / n)) < 0.01, (label, per_parameter)
PYEOF

SMALL=(--model-config "$WORK/small.json")
expect_failure "--zero-stage 4" "--zero-stage 4: expected 0, 1, 2 or 3" estimate "${SMALL[@]}" --zero-stage 4 --world-size 2
expect_failure "--world-size 0" "--world-size 0: expected a positive number" estimate "${SMALL[@]}" --zero-stage 1 --world-size 0
expect_failure "--zero-stage 1 with Adafactor" "--optim adafactor with --zero-stage 1" \
  estimate "${SMALL[@]}" --zero-stage 1 --world-size 2 --optim adafactor
finish
