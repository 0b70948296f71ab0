# The README's "Causal language models" and "LoRA fine-tuning" sections run as written (issue 30 item 7): every
# ```sh block of the two sections, in order, on a clean copy of the repository's data/ and scripts/ with build/hpctrain
# the binary under test, with the sizes the blocks leave to the environment small (CORPUS=tao: one small fortune
# file of Debian's, 85 fortunes; MAX_STEPS=2). The classifier LoRA block needs the quick start's two outputs: made here with the
# quick start's own commands (scripts/quickstart.sh), its 3 epochs cut to 2 steps. (The "A real LM run" subsection's
# block is scripts/lm-example.sh, a build and a 196-step run: not run here.) Without Debian's fortunes package
# the test says SKIP.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if [[ ! -f /usr/share/games/fortunes/science ]]; then
  echo "SKIP: Debian's fortunes package is not installed (apt-get install fortunes): the README's corpus"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export CORPUS=tao MAX_STEPS=2
CLONE="$WORK/clone"
mkdir -p "$CLONE/build"
cp -r "$REPO/data" "$REPO/scripts" "$CLONE/"
ln -s "$HPCTRAIN" "$CLONE/build/hpctrain"

# The ```sh blocks of a section (up to the next heading), each into $WORK/<name>-<i>.sh.
"$PY" - "$REPO/README.md" "$WORK" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
for name, heading in (("lm", "## Causal language models\n"), ("lora", "## LoRA fine-tuning\n")):
    start = text.index(heading)
    end = text.find("\n#", start + len(heading))
    blocks = re.findall(r"^```sh\n(.*?)^```", text[start:end], flags=re.S | re.M)
    assert blocks, name
    for i, block in enumerate(blocks):
        open(f"{sys.argv[2]}/{name}-{i}.sh", "w").write(block)
    print(name, len(blocks), "block(s)")
PYEOF
[[ -f "$WORK/lm-0.sh" && -f "$WORK/lora-0.sh" && -f "$WORK/lora-1.sh" ]] && ok "the sections' blocks were found" || bad "blocks"

# run_block NAME: runs $WORK/NAME.sh with bash -e in the clean copy; its output in $WORK/NAME.log.
run_block() {
  local start=$SECONDS
  if (cd "$CLONE" && bash -e "$WORK/$1.sh") >"$WORK/$1.log" 2>&1; then ok "README block $1 runs as written ($((SECONDS - start)) s)"
  else bad "README block $1 (exit $?)"; tail -20 "$WORK/$1.log"; fi
}

run_block lm-0
"$PY" - "$WORK/lm-0.log" "$CLONE/runs/lm-logprobs.jsonl" <<'PYEOF' && ok "eval --json, generate and predict --logits printed what the README says" || bad "LM block outputs"
import json, math, sys
log = open(sys.argv[1]).read()
report = json.loads(log[log.index('{\n  "examples"'):log.index("}", log.index('{\n  "examples"')) + 1])
assert report["tokens"] > 0 and math.isfinite(report["perplexity"]), report
assert "The meaning of life is" in log, "no generated text"
for line in open(sys.argv[2]):
    row = json.loads(line)
    assert len(row["logprobs"]) == row["tokens"] and abs(sum(row["logprobs"]) + row["loss_sum"]) < 1e-3, row
PYEOF

run_block lora-0
[[ -f "$CLONE/runs/lm-lora/final/adapter_config.json" && -f "$CLONE/runs/lm-lora/final-merged/model.safetensors" ]] \
  && ok "the LM LoRA run wrote final/ and final-merged/" || bad "LM LoRA outputs"
[[ $(grep -c "The meaning of life is" "$WORK/lora-0.log") -ge 3 ]] && ok "generate: 2 sequences with the adapter, 1 merged" \
  || bad "LoRA generate output"

# The quick start's outputs, with its own commands (scripts/quickstart.sh), trained 3 steps instead of 3 epochs.
(cd "$CLONE" && mkdir -p runs/data && python3 scripts/fortunes_to_jsonl.py --output runs/data/fortunes.jsonl &&
  build/hpctrain prep text --input runs/data/fortunes.jsonl --text-field text --label-field label \
    --tokenizer data/bert-base-uncased --max-length 128 --validation-fraction 0.1 --seed 1 \
    --output runs/data/fortunes.h5 --overwrite &&
  mpirun --oversubscribe --bind-to none -np 2 build/hpctrain train --model-config preset:tiny-distilbert \
    --data runs/data/fortunes.h5 --tokenizer data/bert-base-uncased --output runs/fortunes \
    --epochs 3 --max-steps "$MAX_STEPS" --batch-size 16 --lr 5e-4 --warmup-ratio 0.1) >"$WORK/quickstart.log" 2>&1 \
  && ok "the quick start's outputs" || { bad "quick start commands"; tail -20 "$WORK/quickstart.log"; }
run_block lora-1
grep -q "accuracy" "$WORK/lora-1.log" && ok "eval --adapter printed its metrics" || bad "classifier LoRA eval output"
finish
