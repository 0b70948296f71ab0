# --zero-stage 3's refusals at start-up, each naming both options (Adafactor, Local SGD, a --zero-stage that
# differs across ranks), the size check before building counting one rank's part, and a rank that stops before a parameter all-gather: the others' collective timeout
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

# ---- the size check before building counts one rank's part at stage 3 (Note [Size before building]): built unit by
# unit (Note [Deferred materialization]), 1/2 of weights, gradients and AdamW's state (16 / 2): 8 of stage 0's 16
# bytes per parameter at 2 ranks ----
sed 's/"n_layers": 2/"n_layers": 4000000000/' "$WORK/config.json" >"$WORK/huge.json"
for s in 0 3; do
  mpi 2 train $(train_args "$WORK/h$s" | sed "s|$WORK/config.json|$WORK/huge.json|") --max-steps 2 --zero-stage $s \
    >"$WORK/h$s.log" 2>&1 && bad "a model of 4e9 layers trained at stage $s"
done
"$PY" - "$WORK/h0.log" "$WORK/h3.log" <<'PYEOF' && ok "size check: stage 3 on 2 ranks needs 8/16 of stage 0's bytes, said as such" \
  || bad "size check at stage 3"
import re, sys
def needs(path, purpose):
    text = open(path).read()
    m = re.search(r"the model has (\d+) parameters.*?" + re.escape(purpose) + r" needs [0-9.]+ GiB \((\d+) bytes\)", text)
    assert m, (path, text[-600:])
    return int(m.group(1)), int(m.group(2))
p0, b0 = needs(sys.argv[1], "training (weights, gradients, adamw_torch state)")
p3, b3 = needs(sys.argv[2], "training at --zero-stage 3 over 2 ranks (1/2 of weights, gradients, adamw_torch state)")
print(f"{p0} parameters: stage 0 needs {b0} bytes, stage 3 {b3} ({b3 / b0:.4f}x)")
sys.exit(0 if p0 == p3 and b0 == 16 * p0 and b3 == 8 * p3 else 1)
PYEOF

# ---- a rank that stops before a gather: the others' collective timeout names it and the unit ----
HPCTRAIN_TEST_STOP_IN_GATHER=1:3 timeout 120 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train \
  $(train_args "$WORK/stop") --max-steps 2 --zero-stage 3 --collective-timeout 3 --peak-tflops 1 >"$WORK/stop.log" 2>&1
code=$?
[[ $code -ne 0 && $code -ne 124 ]] && ok "a stopped rank ends the job (exit $code), no hang" || bad "stopped rank: exit $code"
grep -q "collective timeout: allgather #[0-9]* on duplicate communicator [0-9]* (parameter all-gather of unit 'transformer layer 1')" \
  "$WORK/stop.log" && grep -q "no answer from rank 1" "$WORK/stop.log" \
  && ok "the timeout names the missing rank and the unit" || { bad "timeout report"; grep -i "timeout" "$WORK/stop.log"; }
finish
