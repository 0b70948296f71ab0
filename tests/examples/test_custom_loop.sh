# examples/custom_loop.cpp under mpirun -np 2: trains, evaluates on the whole split, saves rank 0's state; with
# the dynamic loss scaler and an overflow injected on rank 1 it skips that step on both ranks (through
# Accelerator::optimizer_step), halves the scale, goes on, and ends where `hpctrain train` with the same
# options ends.
# usage: test_custom_loop.sh HPCTRAIN REPO MPIEXEC CUSTOM_LOOP
source "$2/tests/mpi_train/lib.sh"
CUSTOM_LOOP=${4:?custom_loop binary}
make_fixture 0.1

run_ok "custom loop under mpirun -np 2" "$WORK/loop.log" \
  "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$CUSTOM_LOOP" "$WORK/data.h5" "$WORK/config.json" "$WORK/out" 2
grep -Eq "^epoch 1: validation accuracy [0-9.]+$" "$WORK/loop.log" && ok "accuracy printed once per epoch by rank 0" \
  || { bad "accuracy line"; cat "$WORK/loop.log"; }
[[ $(grep -c "validation accuracy" "$WORK/loop.log") -eq 2 ]] && ok "only the main process prints" || bad "print count"
for f in config.json model.safetensors optimizer.safetensors trainer_state.json; do
  [[ -f "$WORK/out/$f" ]] && ok "saved $f" || bad "missing $f"
done
grep -q "\"global_step\": 10" "$WORK/out/trainer_state.json" && ok "10 steps (2 epochs x 10 micro-batches / 2 accumulated)" \
  || { bad "global_step"; cat "$WORK/out/trainer_state.json"; }
# OPTIM picks another optimizer through the train::Optimizer interface; its checkpoint carries the tag
run_ok "custom loop with adafactor" "$WORK/loop-adafactor.log" \
  "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$CUSTOM_LOOP" "$WORK/data.h5" "$WORK/config.json" "$WORK/out-adafactor" 1 adafactor
"$PY" "$HERE/compare_weights.py" --layout "$WORK/out-adafactor/optimizer.safetensors" | grep -q '"optimizer": "adafactor"' \
  && ok "the loop trained with adafactor (optimizer.safetensors tagged adafactor)" || bad "adafactor tag"

# The step protocol (Note [The step protocol]) in a custom loop: --loss-scale dynamic, inf gradients on rank 1 at
# step 3. The same run through `hpctrain train` (the loop's fixed choices: seed 42, batch 4, global shuffle,
# accumulation 2, linear schedule 1e-3 with 2 warm-up steps, clipping at 1.0) ends with the same weights.
scaled=(--loss-scale dynamic --inject-overflow 1:3)
run_ok "custom loop, dynamic loss scale, overflow on rank 1 at step 3" "$WORK/loop-scaled.log" \
  "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$CUSTOM_LOOP" "$WORK/data.h5" "$WORK/config.json" "$WORK/out-scaled" 2 \
  "${scaled[@]}"
grep -q "^epoch 0 step 3 skipped: the gradients hold inf/NaN loss_scale 32768$" "$WORK/loop-scaled.log" \
  && ok "step 3 skipped on every rank, the scale halved to 32768" || { bad "skip line"; cat "$WORK/loop-scaled.log"; }
grep -q "^epoch 1 step 10 loss [0-9.]* grad_norm [0-9.]* loss_scale 32768$" "$WORK/loop-scaled.log" \
  && ok "training went on to step 10 at scale 32768" || bad "steps after the skip"
run_ok "hpctrain train with the loop's options" "$WORK/train-scaled.log" \
  "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train --model-config "$WORK/config.json" \
  --data "$WORK/data.h5" --tokenizer "$WORK/tok" --output "$WORK/train-scaled" --no-progress --epochs 2 --seed 42 \
  --batch-size 4 --shuffle global --gradient-accumulation-steps 2 --lr 1e-3 --warmup-steps 2 --lr-scheduler linear \
  --max-grad-norm 1.0 "${scaled[@]}"
grep -q "step 3: the gradients hold inf/NaN" "$WORK/train-scaled.log" && ok "hpctrain train skipped step 3 too" \
  || bad "hpctrain train's skip"
"$PY" "$HERE/compare_weights.py" "$WORK/train-scaled/final/model.safetensors" "$WORK/out-scaled/model.safetensors" 1e-6 \
  && ok "the custom loop ends where hpctrain train ends" || bad "custom loop and hpctrain train differ"
finish
