# The progress bar under mpirun (issue 11, item 4; Note [Progress bar under mpirun]): `mpirun -np 2 hpctrain train`
# in a terminal (a pty from `script`) draws the bar (carriage return + erase line, "train [###"), though each rank's
# stdout is Open MPI's pty either way; the same run in a pipe prints plain "step N/M" lines and no escape codes.
source "$(dirname "$0")/lib.sh"
command -v script >/dev/null || { echo "skipped: no script(1) (util-linux) to give mpirun a terminal"; exit 0; }
make_fixture
args="$(train_args "$WORK/OUT" | sed 's/ --no-progress//') --batch-size 8 --max-steps 3 --eval-steps 100 --report-to none"
esc=$'\033'
cr=$'\r'

script -qec "$MPIEXEC --oversubscribe --bind-to none -np 2 $HPCTRAIN train ${args//OUT/tty}" /dev/null \
  </dev/null >"$WORK/tty.log" 2>&1 && ok "2 ranks under mpirun in a terminal" || { bad "run in a terminal"; tail -20 "$WORK/tty.log"; }
grep -q "$cr${esc}\[Ktrain \[#" "$WORK/tty.log" && grep -q "step 3/3" "$WORK/tty.log" \
  && ok "  the progress bar is drawn" || { bad "  no progress bar in a terminal"; cat -v "$WORK/tty.log" | tail -8; }

mpi 2 train ${args//OUT/pipe} 2>&1 | cat >"$WORK/pipe.log"
[[ ${PIPESTATUS[0]} -eq 0 ]] && ok "2 ranks under mpirun into a pipe" || { bad "run into a pipe"; tail -20 "$WORK/pipe.log"; }
! grep -q "$esc" "$WORK/pipe.log" && grep -q "^step 1/3 | epoch" "$WORK/pipe.log" && grep -q "^step 3/3 | epoch" "$WORK/pipe.log" \
  && ok "  plain progress lines, no escape codes" || { bad "  pipe output"; cat -v "$WORK/pipe.log" | tail -8; }

finish
