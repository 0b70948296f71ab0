# The network between two hosts goes down mid-training (docs/reliability.md, "Network faults"): the link
# of two network-namespace hosts (netns_lib.sh) is cut right after checkpoint-20 is published. Every rank ends
# within --collective-timeout plus the watchdog's 5 s wait for the other ranks' answers (plus slack), each naming
# the peer it lost, its node and the collective; the checkpoint verifies; once the link is back,
# `--resume auto` on the two hosts ends bitwise equal to an uninterrupted run. Skips (77) without root or strace.
# The cut must land before the next checkpoint: on an idle machine 20 steps of this model take less than the
# poll that sees checkpoint-20, so rank 0 runs under strace, which holds each rename(2) for 1 s after it took
# effect: the folder is published, then rank 0 waits 1 s while the link goes down.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
command -v strace >/dev/null || { echo "SKIP: no strace (apt-get install strace) to hold the publish"; exit 77; }
netns_setup
make_fixture
timeout_s=10 hold_s=1  # after the cut, rank 0 is still held in the publishing rename for up to 1 s
run=(--shuffle global --max-steps 60 --save-steps 20 --eval-steps 1000 --batch-size 4 --collective-timeout $timeout_s)

run_ok "uninterrupted: mpirun -np 2 on one host" "$WORK/whole.log" mpi 2 train $(train_args "$WORK/whole") "${run[@]}"

# Rank 0 under strace: each rename(2) returns 1 s after it took effect.
hold=(strace -f -qq -o /dev/null -e trace=rename,renameat,renameat2 -e inject=rename,renameat,renameat2:delay_exit=1s)
two_hosts bash -c 'if [[ $OMPI_COMM_WORLD_RANK == 0 ]]; then exec "${@:2}" 2>"$0.0"; else exec "${@:2+$1}" 2>"$0.1"; fi' \
  "$WORK/cut.err" "${#hold[@]}" "${hold[@]}" "$HPCTRAIN" train $(train_args "$WORK/cut") "${run[@]}" >"$WORK/cut.log" 2>&1 &
launcher=$!
cut_link_when "$WORK/cut/checkpoint-20" "$launcher" "$WORK/cut.log" && ok "link down after checkpoint-20" \
  || bad "no checkpoint-20 on the two hosts"
start=$CUT_AT
ranks_end_within "link down" $((timeout_s + 8 + hold_s)) "$start"
launcher_ends_after_link_up "link down" "$launcher"
names_lost_peer "link down" "$WORK/cut.err"
[[ ! -d "$WORK/cut/final" ]] && ok "no final model from the cut run" || bad "the cut run saved a final model"
checkpoints_intact "link down" "$WORK/cut"
ls "$WORK/cut" | grep -E '^checkpoint-' | grep -vx 'checkpoint-20' && bad "a checkpoint after the cut" \
  || ok "no checkpoint after the cut: it landed in the steps after checkpoint-20"

resumes_exactly "${run[@]}"
finish
