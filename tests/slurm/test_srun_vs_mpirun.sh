# Direct launch `srun --mpi=pmix -n 2 hpctrain train` gives bitwise the same final parameters as
# `mpirun -np 2` (--shuffle global, dropout off): rank, size and local rank come right from PMIx.
source "$(dirname "$0")/lib.sh"
make_fixture
steps=(--shuffle global --max-steps 8 --save-steps 100 --eval-steps 100 --batch-size 4)
run_ok "mpirun -np 2" "$WORK/mpirun.log" mpi 2 train $(train_args "$WORK/mpirun") "${steps[@]}"
run_ok "srun --mpi=pmix -n 2" "$WORK/srun.log" srun --mpi=pmix -n 2 "$HPCTRAIN" train $(train_args "$WORK/srun") "${steps[@]}"
grep -q "x 2 rank(s)" "$WORK/srun.log" && ok "srun: 2 ranks in one job" || { bad "srun rank count"; head -5 "$WORK/srun.log"; }
compare "$WORK/mpirun/final/model.safetensors" "$WORK/srun/final/model.safetensors" 0 \
  && ok "srun weights == mpirun weights" || bad "srun weights differ from mpirun's"
finish
