# Resume for SGD and Adafactor (AdamW: test_resume.sh). On 2 ranks, stop at step 7 and resume to 14:
# bitwise the uninterrupted run (weights, optimizer state, loss curve). Resume on 1 rank (--shuffle
# global, the same global batch): the straight 2-rank run's weights up to the rounding of the gradient
# average (attention's key bias left out: its exact gradient is zero, and Adafactor's normalized update
# turns the rounding noise into steps of size lr). optimizer.safetensors carries the type tag; resuming with another --optim is refused on every
# rank, naming both optimizers (Note [Optimizer checkpoints]).
source "$(dirname "$0")/lib.sh"
make_fixture 0.0  # no dropout: 1 rank and 2 ranks draw different masks

declare -A args=(
  [sgd]="--optim sgd --sgd-momentum 0.9 --sgd-dampening 0.1 --weight-decay 0.01"
  [adafactor]="--optim adafactor --adafactor-beta1 0.9 --weight-decay 0.01"
)
declare -A lr=([sgd]=0.1 [adafactor]=1e-3)

for optim in sgd adafactor; do
  read -r -a extra <<<"${args[$optim]}"
  export LR=${lr[$optim]}
  out="$WORK/$optim"
  check_exact_resume "$optim" "$out" 0 --shuffle global "${extra[@]}"
  "$PY" "$HERE/compare_weights.py" --layout "$out-whole/checkpoint-14/optimizer.safetensors" \
    | grep -q "\"optimizer\": \"$optim\"" && ok "$optim: optimizer.safetensors is tagged $optim" || bad "$optim: type tag"
  # checkpoint-7 of the 2-rank run (per-rank batch 4) continued on 1 rank with per-rank batch 8: same global batches
  run_ok "$optim: resume checkpoint-7 on 1 rank" "$out-one.log" mpi 1 train $(train_args "$out-pieces") \
    --shuffle global --lr-scheduler constant --warmup-steps 3 --save-steps 4 --batch-size 8 --max-steps 14 \
    "${extra[@]}" --resume "$out-pieces/checkpoint-7"
  compare "$out-whole/final/model.safetensors" "$out-pieces/final/model.safetensors" 1e-6 --skip k_lin.bias \
    && ok "$optim: 2 -> 1 rank resume == the 2-rank run" || bad "$optim: 2 -> 1 rank weights differ"
done
unset LR

# another optimizer's checkpoint: refused on both ranks, naming both, within seconds
if timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(train_args "$WORK/sgd-pieces") \
    --shuffle global --lr-scheduler constant --warmup-steps 3 --save-steps 4 --batch-size 4 --max-steps 20 --optim adafactor \
    --resume "$WORK/sgd-pieces/checkpoint-7" >"$WORK/mismatch.log" 2>&1; then
  bad "resuming sgd's checkpoint with --optim adafactor succeeded"
else
  code=$?
  [[ $code -ne 124 ]] && ok "mismatch ends (exit $code, no hang)" || bad "mismatch hangs"
  grep -q "holds the state of optimizer 'sgd', but this run uses 'adafactor'" "$WORK/mismatch.log" \
    && ok "the error names both optimizers" || { bad "mismatch message"; tail -5 "$WORK/mismatch.log"; }
fi
finish
