# Two "hosts" on one machine: two network namespaces joined by a veth pair, one rank in each, Open MPI
# restricted to TCP on the veth (no shared memory between the ranks: the multi-node path) and started by
# an rsh agent that enters the namespace. The final parameters equal the one-host `mpirun -np 2` run.
# Skips (77) without root or `ip netns` permission (netns_lib.sh). Tested facts: docs/two-hosts-netns.md.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
netns_setup

make_fixture
steps=(--shuffle global --max-steps 8 --save-steps 100 --eval-steps 100 --batch-size 4)
run_ok "one host: mpirun -np 2" "$WORK/one.log" mpi 2 train $(train_args "$WORK/one") "${steps[@]}"
run_ok "two hosts: one rank per namespace" "$WORK/hosts.log" two_hosts bash -c 'readlink /proc/self/ns/net' 
[[ $(sort -u "$WORK/hosts.log" | wc -l) -eq 2 ]] && ok "the ranks run in 2 different network namespaces" \
  || { bad "namespaces of the ranks"; cat "$WORK/hosts.log"; }
run_ok "two hosts: mpirun -np 2 over TCP" "$WORK/two.log" two_hosts "$HPCTRAIN" train $(train_args "$WORK/two") "${steps[@]}"
grep -q "x 2 rank(s)" "$WORK/two.log" && ok "2 ranks" || { bad "rank count"; head -5 "$WORK/two.log"; }
compare "$WORK/one/final/model.safetensors" "$WORK/two/final/model.safetensors" 0 \
  && ok "two-host weights == one-host weights" || bad "two-host weights differ"
finish
