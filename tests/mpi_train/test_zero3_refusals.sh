# --zero-stage 3's refusals at start-up, each naming both options (Adafactor, Local SGD, a --zero-stage that
# differs across ranks), and a rank that stops before a parameter all-gather: the others' collective timeout
# names it and the unit, and the job ends (no hang). Note [Unit gathers] in src/train/parallel/fully_sharded.cpp.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0

mpi 2 train $(train_args "$WORK/a") --max-steps 2 --optim adafactor --zero-stage 3 >"$WORK/a.log" 2>&1 \
  && bad "Adafactor with stage 3 accepted" || {
  grep -q -- "--optim adafactor with --zero-stage 3 is not supported" "$WORK/a.log" \
    && ok "Adafactor with --zero-stage 3 refused, naming both" || { bad "Adafactor message"; tail -5 "$WORK/a.log"; }; }
mpi 2 train $(train_args "$WORK/l") --max-steps 2 --local-sgd-steps 2 --zero-stage 3 >"$WORK/l.log" 2>&1 \
  && bad "Local SGD with stage 3 accepted" || {
  grep -q -- "--local-sgd-steps 2 with --zero-stage 3 is not supported" "$WORK/l.log" \
    && ok "Local SGD with --zero-stage 3 refused, naming both" || { bad "Local SGD message"; tail -5 "$WORK/l.log"; }; }
timeout 60 "$MPIEXEC" --oversubscribe --bind-to none -np 1 "$HPCTRAIN" train $(train_args "$WORK/m") --max-steps 2 \
  --zero-stage 3 : -np 1 "$HPCTRAIN" train $(train_args "$WORK/m") --max-steps 2 --zero-stage 2 >"$WORK/m.log" 2>&1 \
  && bad "mismatched --zero-stage accepted" || {
  grep -q -- "--zero-stage differs across ranks: rank 0 has 3, rank 1 has 2" "$WORK/m.log" \
    && ok "mismatched --zero-stage refused, naming the option" || { bad "mismatch message"; tail -5 "$WORK/m.log"; }; }

# ---- a rank that stops before a gather: the others' collective timeout names it and the unit ----
HPCTRAIN_TEST_STOP_IN_GATHER=1:3 timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train \
  $(train_args "$WORK/stop") --max-steps 2 --zero-stage 3 --collective-timeout 3 --peak-tflops 1 >"$WORK/stop.log" 2>&1
code=$?
[[ $code -ne 0 && $code -ne 124 ]] && ok "a stopped rank ends the job (exit $code), no hang" || bad "stopped rank: exit $code"
grep -q "collective timeout: allgather #[0-9]* on duplicate communicator [0-9]* (parameter all-gather of unit 'transformer layer 1')" \
  "$WORK/stop.log" && grep -q "no answer from rank 1" "$WORK/stop.log" \
  && ok "the timeout names the missing rank and the unit" || { bad "timeout report"; grep -i "timeout" "$WORK/stop.log"; }
finish
