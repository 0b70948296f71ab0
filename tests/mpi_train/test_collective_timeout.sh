# The collective watchdog (Note [Collective timeout]) does not disturb normal training: a 2-rank run with the
# default --collective-timeout and one with a short one (2 s: the steps' waits are far shorter) both finish
# with exit 0, no report, and a final model; a bad value is rejected naming the option.
source "$(dirname "$0")/lib.sh"
make_fixture 0.0

for timeout in default 2; do
  extra=()
  [[ $timeout != default ]] && extra=(--collective-timeout "$timeout")
  run_ok "train with --collective-timeout $timeout" "$WORK/t-$timeout.log" \
    timeout 300 "$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(train_args "$WORK/t-$timeout") \
    --max-steps 6 "${extra[@]}"
  grep -q "collective timeout" "$WORK/t-$timeout.log" && bad "a timeout report in a normal run" || ok "no report ($timeout)"
  [[ -d "$WORK/t-$timeout/final" ]] && ok "final model ($timeout)" || bad "no final model ($timeout)"
done

"$MPIEXEC" --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train $(train_args "$WORK/bad") --collective-timeout -1 \
  >"$WORK/bad.log" 2>&1 && bad "--collective-timeout -1 accepted" || {
  grep -q -- "--collective-timeout -1: expected seconds >= 0" "$WORK/bad.log" && ok "--collective-timeout -1 rejected" \
    || { bad "no message for --collective-timeout -1"; cat "$WORK/bad.log"; }; }
finish
