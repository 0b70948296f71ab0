# Two "hosts" on one machine: two network namespaces joined by a veth pair, one rank in each, Open MPI
# restricted to TCP on the veth (no shared memory between the ranks: the multi-node path) and started by
# an rsh agent that enters the namespace. The final parameters equal the one-host `mpirun -np 2` run.
# Skips (77) without root or `ip netns` permission. Tested facts: docs/two-hosts-netns.md.
source "$2/tests/mpi_train/lib.sh" "$@"
HERE_MH="$REPO/tests/multihost"
command -v ip >/dev/null || { echo "SKIP: no ip command (apt-get install iproute2)"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root for ip netns"; exit 77; }
export HPT_NS_A="hpt-a-$$" HPT_NS_B="hpt-b-$$"
veth_a="hpa$$" veth_b="hpb$$"   # interface names: at most 15 characters
cleanup() {
  ip netns del "$HPT_NS_A" 2>/dev/null; ip netns del "$HPT_NS_B" 2>/dev/null   # the veth pair goes with them
  [[ -n "${HPCTRAIN_KEEP_WORK:-}" ]] || rm -rf "$WORK"
}
trap cleanup EXIT
if ! ip netns add "$HPT_NS_A" 2>"$WORK/netns.err"; then
  echo "SKIP: cannot create a network namespace: $(cat "$WORK/netns.err")"; exit 77
fi
ip netns add "$HPT_NS_B" && ip link add "$veth_a" type veth peer name "$veth_b" \
  && ip link set "$veth_a" netns "$HPT_NS_A" && ip link set "$veth_b" netns "$HPT_NS_B" \
  && ip -n "$HPT_NS_A" addr add 10.77.0.1/24 dev "$veth_a" && ip -n "$HPT_NS_B" addr add 10.77.0.2/24 dev "$veth_b" \
  && ip -n "$HPT_NS_A" link set "$veth_a" up && ip -n "$HPT_NS_B" link set "$veth_b" up \
  && ip -n "$HPT_NS_A" link set lo up && ip -n "$HPT_NS_B" link set lo up \
  && ok "namespaces $HPT_NS_A, $HPT_NS_B joined by $veth_a/$veth_b" || { bad "network set-up"; finish; exit 1; }
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$WORK/hosts"

make_fixture
steps=(--shuffle global --max-steps 8 --save-steps 100 --eval-steps 100 --batch-size 4)
run_ok "one host: mpirun -np 2" "$WORK/one.log" mpi 2 train $(train_args "$WORK/one") "${steps[@]}"
two_hosts() {
  ip netns exec "$HPT_NS_A" "$MPIEXEC" --hostfile "$WORK/hosts" -np 2 --map-by node --bind-to none \
    --mca plm_rsh_agent "$HERE_MH/rsh_agent.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 "$@"
}
run_ok "two hosts: one rank per namespace" "$WORK/hosts.log" two_hosts bash -c 'readlink /proc/self/ns/net' 
[[ $(sort -u "$WORK/hosts.log" | wc -l) -eq 2 ]] && ok "the ranks run in 2 different network namespaces" \
  || { bad "namespaces of the ranks"; cat "$WORK/hosts.log"; }
run_ok "two hosts: mpirun -np 2 over TCP" "$WORK/two.log" two_hosts "$HPCTRAIN" train $(train_args "$WORK/two") "${steps[@]}"
grep -q "x 2 rank(s)" "$WORK/two.log" && ok "2 ranks" || { bad "rank count"; head -5 "$WORK/two.log"; }
compare "$WORK/one/final/model.safetensors" "$WORK/two/final/model.safetensors" 0 \
  && ok "two-host weights == one-host weights" || bad "two-host weights differ"
finish
