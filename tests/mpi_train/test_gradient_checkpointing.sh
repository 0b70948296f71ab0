# --gradient-checkpointing on 2 ranks (overlapped reducer with several buckets, 2 accumulated micro-batches,
# dropout on) trains to the same parameters as the plain run, for DistilBERT and BERT.
source "$(dirname "$0")/lib.sh"
make_fixture 0.1
cat >"$WORK/bert.json" <<JSON
{"model_type": "bert", "vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 64, "max_position_embeddings": 32, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
JSON
steps=(--max-steps 4 --save-steps 100 --eval-steps 100 --batch-size 4 --gradient-accumulation-steps 2
       --bucket-mb 0.01 --first-bucket-mb 0.004 --overlap on)
W=final/model.safetensors
for model in distilbert bert; do
  [[ $model == bert ]] && cp "$WORK/bert.json" "$WORK/config.json"
  run_ok "$model: plain" "$WORK/$model-plain.log" mpi 2 train $(train_args "$WORK/$model-plain") "${steps[@]}"
  run_ok "$model: --gradient-checkpointing" "$WORK/$model-ckpt.log" mpi 2 train $(train_args "$WORK/$model-ckpt") \
    "${steps[@]}" --gradient-checkpointing
  compare "$WORK/$model-plain/$W" "$WORK/$model-ckpt/$W" 1e-6 && ok "$model: checkpointed == plain (rel. diff <= 1e-6)" \
    || bad "$model: checkpointed and plain parameters differ"
done
# Not vacuous: another seed (weights, data order, dropout masks) gives parameters the comparison tells apart.
run_ok "bert: --seed 7" "$WORK/seed.log" mpi 2 train $(train_args "$WORK/seed") "${steps[@]}" --seed 7
compare "$WORK/bert-plain/$W" "$WORK/seed/$W" 1e-6 >/dev/null && bad "another seed gives the same parameters" \
  || ok "another seed gives other parameters (the comparison can fail)"
grep -q "BertForSequenceClassification" "$WORK/bert-ckpt.log" && ok "the BERT run built BERT" \
  || { bad "the BERT run did not build BERT"; head "$WORK/bert-ckpt.log"; }
finish
