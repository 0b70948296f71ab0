# Chat templates and SFT data from the command line (issue 32): `chat-template` prints exactly the text transformers'
# apply_chat_template renders and, with --json, its input_ids and assistant_masks (goldens by
# tests/prep/sft/make_sft_goldens.py, four tokenizer folders with trl's training templates); `prep sft` gives the
# same file on 1 and 2 ranks, names bad rows and writes nothing then; `generate --chat` renders the prompt as the
# template does (its prompt ids equal chat-template --json --add-generation-prompt); the errors name the file, line
# and construct.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
SFT="$REPO/tests/prep/sft"
GOLDENS="$SFT/goldens.json"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

# messages STYLE INDEX: writes the golden case's conversation to $WORK/messages.json and prints its add_generation_prompt.
messages() {
  "$PY" - "$GOLDENS" "$SFT/conversations.jsonl" "$1" "$2" "$WORK/messages.json" <<'PYEOF'
import json, sys
case = json.load(open(sys.argv[1]))["apply_chat_template"][sys.argv[3]][int(sys.argv[4])]
rows = [json.loads(l) for l in open(sys.argv[2])]
json.dump(rows[case["row"]]["messages"], open(sys.argv[5], "w"), ensure_ascii=False)
print("--add-generation-prompt" if case["add_generation_prompt"] else "")
PYEOF
}
# (Every case of the goldens is checked in-process by tests/chat/encoding_test.cpp; here one per template.)
for style in qwen2_5 llama3 phi3 gemma; do
  i=1
  agp=$(messages $style $i)
  "$HPCTRAIN" chat-template --tokenizer "$SFT/$style" --messages "$WORK/messages.json" $agp --json >"$WORK/json" 2>"$WORK/err" \
    || { bad "$style: chat-template --json failed"; cat "$WORK/err"; continue; }
  if [[ $style == llama3 ]]; then
    "$HPCTRAIN" chat-template --tokenizer "$SFT/$style" --messages "$WORK/messages.json" $agp >"$WORK/text" 2>"$WORK/err" \
      || { bad "$style: chat-template failed"; cat "$WORK/err"; }
  else
    "$PY" -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))["text"])' "$WORK/json" >"$WORK/text"
  fi
  "$PY" - "$GOLDENS" "$style" "$i" "$WORK/text" "$WORK/json" <<'PYEOF' && ok "$style: text, ids and assistant mask = transformers'" \
    || bad "$style"
import json, sys
case = json.load(open(sys.argv[1]))["apply_chat_template"][sys.argv[2]][int(sys.argv[3])]
text = open(sys.argv[4], "rb").read().decode("utf-8")
out = json.loads(open(sys.argv[5]).read())
assert text == case["text"], (text, case["text"])
assert out["text"] == case["text"] and out["input_ids"] == case["input_ids"], out
assert out["assistant_masks"] == case["assistant_masks"], (out["assistant_masks"], case["assistant_masks"])
assert out["mask_method"] == "generation"
PYEOF
done

# Errors: the template file, its line and the construct; the template's own exception; bad input files.
printf '{{ bos_token }}\n{%% include "other.jinja" %%}\n' >"$WORK/bad.jinja"
echo '[{"role": "user", "content": "hi"}]' >"$WORK/hi.json"
expect_failure "an unsupported construct names the file, line and construct" 'bad\.jinja line 2: unsupported construct: \{% include %\}' \
  "$HPCTRAIN" chat-template --tokenizer "$SFT/llama3" --chat-template "$WORK/bad.jinja" --messages "$WORK/hi.json"
echo '[{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]' >"$WORK/system.json"
expect_failure "raise_exception in the template" 'chat_template\.jinja line [0-9]+: the template raised an exception: System role not supported' \
  "$HPCTRAIN" chat-template --tokenizer "$SFT/gemma" --messages "$WORK/system.json"
echo '{"role": "user"}' >"$WORK/object.json"
expect_failure "--messages must hold a list" '--messages .*object\.json: expected a JSON list, got object' \
  "$HPCTRAIN" chat-template --tokenizer "$SFT/llama3" --messages "$WORK/object.json"
echo '[{"role": "user", ' >"$WORK/broken.json"
expect_failure "--messages must be JSON" '--messages .*broken\.json: not valid JSON' \
  "$HPCTRAIN" chat-template --tokenizer "$SFT/llama3" --messages "$WORK/broken.json"
expect_failure "--template-kwargs must be an object" "--template-kwargs: expected a JSON object" \
  "$HPCTRAIN" chat-template --tokenizer "$SFT/llama3" --messages "$WORK/hi.json" --template-kwargs '[1]'
expect_failure "a folder without a template" 'no chat template' \
  "$HPCTRAIN" chat-template --tokenizer "$REPO/tests/tokenize/golden/bpe/gpt2" --messages "$WORK/hi.json"

# prep sft: 1 rank == 2 ranks; a bad row is named and nothing is written; the output is never an input.
prep=(prep sft --no-progress --tokenizer "$SFT/llama3" --max-length 64 --validation-fraction 0.3 --seed 5)
expect_success "prep sft, 1 rank" "$HPCTRAIN" "${prep[@]}" --input "$SFT/conversations.jsonl" "$SFT/chat_pairs.jsonl" \
  --output "$WORK/one.h5"
expect_success "prep sft, 2 ranks" mpirun --oversubscribe --bind-to none -np 2 "$HPCTRAIN" "${prep[@]}" \
  --input "$SFT/conversations.jsonl" "$SFT/chat_pairs.jsonl" --output "$WORK/two.h5"
"$PY" "$REPO/tests/cli/prep_same_datasets.py" "$WORK/one.h5" "$WORK/two.h5" && ok "1 and 2 ranks write the same datasets" \
  || bad "1 vs 2 ranks"
{ head -2 "$SFT/conversations.jsonl"; echo '{"messages": [{"role": "user", "content": "q"}, {"role": "robot", "content": "a"}]}'; } \
  >"$WORK/bad.jsonl"
expect_failure "a bad row is named" 'bad\.jsonl: line 3 \(row 2\): messages\[1\]: unknown role .robot.' \
  "$HPCTRAIN" "${prep[@]}" --input "$WORK/bad.jsonl" --output "$WORK/bad.h5"
expect_no_file "nothing written after a bad row" "$WORK/bad.h5"
expect_failure "the output cannot be an input" 'input|overwrite' \
  "$HPCTRAIN" "${prep[@]}" --input "$WORK/bad.jsonl" --output "$WORK/bad.jsonl" --overwrite

# generate --chat: the prompt is the user's message rendered with the generation prompt, as chat-template renders it.
cat >"$WORK/qwen2.json" <<'JSON'
{"model_type": "qwen2", "vocab_size": 720, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
 "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128, "tie_word_embeddings": true}
JSON
expect_success "a tiny Qwen2 to talk to" "$HPCTRAIN" train --data "$WORK/one.h5" --model-config "$WORK/qwen2.json" \
  --tokenizer "$SFT/llama3" --output "$WORK/model" --max-steps 1 --lr 0 --threads 1 --no-progress --report-to none
"$HPCTRAIN" generate --model "$WORK/model/final" --tokenizer "$SFT/llama3" --chat --system "Be brief." --prompt "What is a cat?" \
  --max-new-tokens 4 --threads 1 --json >"$WORK/gen.json" 2>"$WORK/err" || { bad "generate --chat"; cat "$WORK/err"; }
echo '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a cat?"}]' >"$WORK/q.json"
"$HPCTRAIN" chat-template --tokenizer "$SFT/llama3" --messages "$WORK/q.json" --add-generation-prompt --json >"$WORK/q.out" 2>"$WORK/err"
"$PY" - "$WORK/gen.json" "$WORK/q.out" <<'PYEOF' && ok "generate --chat: prompt ids = the template's with the generation prompt" \
  || bad "generate --chat prompt ids"
import json, sys
gen, tpl = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert gen["prompt_ids"] == tpl["input_ids"], (gen["prompt_ids"], tpl["input_ids"])
assert 0 < len(gen["new_ids"]) <= 4
PYEOF
expect_failure "--system needs --chat" '--system and --chat-template go with --chat' \
  "$HPCTRAIN" generate --model "$WORK/model/final" --tokenizer "$SFT/llama3" --system x --prompt y --max-new-tokens 1
finish
