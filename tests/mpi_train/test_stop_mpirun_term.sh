# SIGTERM to mpirun itself (issue 11 item 3, README "Stopping a run"): Open MPI 4.1 stops forwarding the ranks'
# output at once and signals them only after --mca odls_base_sigkill_timeout seconds (SIGKILL as long after):
# with 3 s the ranks save checkpoint-K in time; their blocked output must not keep them from it.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/stop_lib.sh"
make_fixture 0.0

"$MPIEXEC" --mca odls_base_sigkill_timeout 3 --oversubscribe --bind-to none -np 2 "$HPCTRAIN" train \
  $(train_args "$WORK/term") "${stop_args[@]}" --max-steps 100000 >"$WORK/term.log" 2>&1 &
launcher=$!
wait_step term 5 || bad "the run did not reach step 5"
kill -TERM "$launcher"
wait_rc
[[ $rc -ne 0 ]] && ok "mpirun exits non-zero ($rc) when terminated" || bad "mpirun exited 0"
dir=$(ls -d "$WORK"/term/checkpoint-* 2>/dev/null | tail -1)
[[ -n "$dir" ]] && ok "the ranks saved ${dir##*/} before the SIGKILL" || { bad "no checkpoint"; tail "$WORK/term.log"; }
[[ -n "$dir" ]] && (cd "$dir" && sha256sum -c --quiet checksums.sha256) && ok "${dir##*/} verifies" || bad "checkpoint does not verify"
[[ ! -e "$WORK/term/final" ]] && ok "no final model" || bad "a final model was written"
finish
