# Shared by the --zero-stage 3 scripts (test_zero3*.sh), after lib.sh and its make_fixture (DistilBERT) and/or
# make_lm_fixture (GPT-2, Llama): runs of STEPS (8) AdamW steps of one global batch with clipping and accumulation,
# compared at 1e-6 relative per tensor.
W=final/model.safetensors
# The global batch (8 rows, --shuffle global: the same rows at any rank count) as 2 ranks x 2 x accumulation 2,
# 4 ranks x 1 x 2 or 1 rank x 4 x 2; clipping at a small norm, so that it clips.
adamw=(--lr-scheduler constant --shuffle global --eval-steps 100 --gradient-accumulation-steps 2
       --max-grad-norm 0.5 --weight-decay 0.01 --peak-tflops 1 --report-to none)
declare -A per_rank=([1]=4 [2]=2 [4]=1)
lm_args() {  # lm_args CONFIG OUTPUT
  echo --data "$WORK/packed.h5" --model-config "$WORK/$1" --tokenizer "$BPE" --output "$WORK/$2" --threads 1 \
    --no-progress --logging-steps 1 --lr 5e-3
}
# zero_run NAME NP STAGE [ARGS...] (DistilBERT), lm_run NAME NP STAGE CONFIG [ARGS...]: STEPS (8) steps of the
# global batch
zero_run() {
  local name=$1 np=$2 stage=$3; shift 3
  run_ok "$name" "$WORK/$name.log" mpi "$np" train $(train_args "$WORK/$name") "${adamw[@]}" \
    --max-steps "${STEPS:-8}" --save-steps "${SAVE_STEPS:-100}" --batch-size "${per_rank[$np]}" --zero-stage "$stage" "$@"
}
lm_run() {
  local name=$1 np=$2 stage=$3 config=$4; shift 4
  run_ok "$name" "$WORK/$name.log" mpi "$np" train $(lm_args "$config" "$name") "${adamw[@]}" \
    --max-steps 8 --save-steps 100 --batch-size "${per_rank[$np]}" --zero-stage "$stage" "$@"
}
same() {  # same LABEL A B [--skip PART]: 1e-6 relative (compare_weights.py)
  local label=$1 a=$2 b=$3; shift 3
  compare "$WORK/$a/$W" "$WORK/$b/$W" 1e-6 "$@" && ok "$label" || bad "$label"
}
