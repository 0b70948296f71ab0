# The network between two hosts goes down mid-training (docs/reliability.md, "Network faults"): the link
# of two network-namespace hosts (netns_lib.sh) is cut once checkpoint-20 exists. Every rank ends within
# --collective-timeout plus the watchdog's 5 s wait for the other ranks' answers (plus slack), each naming
# the peer it lost, its node and the collective; the checkpoint verifies; once the link is back,
# `--resume auto` on the two hosts ends bitwise equal to an uninterrupted run. Skips (77) without root.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
netns_setup
make_fixture
timeout_s=10
run=(--shuffle global --max-steps 60 --save-steps 20 --eval-steps 1000 --batch-size 4 --collective-timeout $timeout_s)

run_ok "uninterrupted: mpirun -np 2 on one host" "$WORK/whole.log" mpi 2 train $(train_args "$WORK/whole") "${run[@]}"

two_hosts "${PER_RANK_STDERR[@]}" "$WORK/cut.err" "$HPCTRAIN" train $(train_args "$WORK/cut") "${run[@]}" >"$WORK/cut.log" 2>&1 &
launcher=$!
cut_link_when "$WORK/cut/checkpoint-20" "$launcher" "$WORK/cut.log" && ok "link down after checkpoint-20" \
  || bad "no checkpoint-20 on the two hosts"
start=$CUT_AT
ranks_end_within "link down" $((timeout_s + 8)) "$start"
launcher_ends_after_link_up "link down" "$launcher"
names_lost_peer "link down" "$WORK/cut.err"
[[ ! -d "$WORK/cut/final" ]] && ok "no final model from the cut run" || bad "the cut run saved a final model"
checkpoints_intact "link down" "$WORK/cut"

resumes_exactly "${run[@]}"
finish
