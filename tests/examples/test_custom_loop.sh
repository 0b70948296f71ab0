# examples/custom_loop.cpp under mpirun -np 2: trains, evaluates on the whole split, saves rank 0's state.
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
finish
