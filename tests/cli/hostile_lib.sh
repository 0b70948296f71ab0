# Helpers of the tests/cli/test_hostile_*.sh scripts (args: binary, repo root): tests/cli/lib.sh's expect_*
# helpers plus tests/mpi_train/lib.sh's fixture ($WORK/tok, rows.jsonl, data.h5, config.json; train_args),
# and MODEL, a model trained on it for 2 steps with a checkpoint per step ($WORK/model/checkpoint-{1,2}).
source "$2/tests/cli/lib.sh" "$@"
rmdir "$WORK"
source "$REPO/tests/mpi_train/lib.sh" "$1" "$2"  # its own WORK and trap
make_fixture
"$HPCTRAIN" train $(train_args "$WORK/model") --max-steps 2 --save-steps 1 >"$WORK/fixture.log" 2>&1 \
  || { echo "fixture: train failed"; cat "$WORK/fixture.log"; exit 1; }
MODEL="$WORK/model/final"

# with_file FROM TO ARGS...: train_args-style arguments with the path FROM replaced by TO.
with_file() {
  local from=$1 to=$2; shift 2
  "$@" | sed "s|$from|$to|"
}
