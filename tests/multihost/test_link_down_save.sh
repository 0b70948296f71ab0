# The network between two hosts goes down during a checkpoint save (docs/reliability.md, "Network faults"):
# rank 0 writes checkpoint-20 while rank 1 waits in the save's agreement. To hit the save every time, rank 0
# runs under strace, which holds each of its rename(2) calls for 1 s (a checkpoint makes four: its files, then
# the hidden folder to checkpoint-20), and the link is cut once the hidden folder exists. No rank hangs
# (each ends within --collective-timeout + 5 s + the 4 s the save takes now, plus slack, naming the lost peer), no
# partial checkpoint-STEP folder exists, every checkpoint verifies, and `--resume auto` after the link
# returns is bitwise equal to an uninterrupted run. Skips (77) without root or without strace.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
command -v strace >/dev/null || { echo "SKIP: no strace (apt-get install strace) to hold the save"; exit 77; }
netns_setup
make_fixture
timeout_s=10 hold_s=4  # the held save: four renames, 1 s each
run=(--shuffle global --max-steps 40 --save-steps 20 --eval-steps 1000 --batch-size 4 --collective-timeout $timeout_s)

run_ok "uninterrupted: mpirun -np 2 on one host" "$WORK/whole.log" mpi 2 train $(train_args "$WORK/whole") "${run[@]}"

# Rank 0 under strace: each rename(2) waits 1 s before it runs.
hold=(strace -f -qq -o /dev/null -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:delay_enter=1s)
two_hosts bash -c 'if [[ $OMPI_COMM_WORLD_RANK == 0 ]]; then exec "${@:2}" 2>"$0.0"; else exec "${@:2+$1}" 2>"$0.1"; fi' \
  "$WORK/cut.err" "${#hold[@]}" "${hold[@]}" "$HPCTRAIN" train $(train_args "$WORK/cut") "${run[@]}" >"$WORK/cut.log" 2>&1 &
launcher=$!
if cut_link_when "$WORK/cut/.checkpoint-20.tmp-*" "$launcher" "$WORK/cut.log"; then
  [[ ! -e "$WORK/cut/checkpoint-20" ]] && ok "link down while rank 0 saves checkpoint-20" || bad "checkpoint-20 was published already"
else
  bad "no hidden checkpoint-20 folder on the two hosts"
fi
start=$CUT_AT
ranks_end_within "link down during the save" $((timeout_s + 8 + hold_s)) "$start"
launcher_ends_after_link_up "link down during the save" "$launcher"
names_lost_peer "link down during the save" "$WORK/cut.err"
checkpoints_intact "link down during the save" "$WORK/cut"
ls -a "$WORK/cut" | grep -E '^checkpoint-' | grep -vx 'checkpoint-20' && bad "an unexpected checkpoint folder" \
  || ok "no checkpoint folder but the complete checkpoint-20"

resumes_exactly "${run[@]}"
ls -a "$WORK/cut" | grep -q '\.tmp-' && bad "hidden save temporaries left after the resumed run" \
  || ok "no hidden save temporaries after the resumed run"
finish
