# A lossy, slow network between two hosts (docs/reliability.md, "Network faults") slows a run down but
# changes no result: the final weights equal the one-host run's bit for bit. With `tc netem` (kernel
# module sch_netem): 5% loss and 50 ms delay each way. Where netem is missing (the kernel lacks
# CONFIG_NET_SCH_NETEM) that part prints a SKIP line and the link is shaped with `tc tbf` instead: 2 Mbit/s
# with an 8 KB queue, so every gradient allreduce overflows the queue and loses packets (counted by tc)
# and waits for TCP's retransmissions. Skips (77) without root.
source "$2/tests/mpi_train/lib.sh" "$@"
source "$REPO/tests/multihost/netns_lib.sh"
netns_setup
make_fixture
run=(--shuffle global --max-steps 12 --save-steps 100 --eval-steps 100 --batch-size 4 --collective-timeout 60)
run_ok "one host: mpirun -np 2" "$WORK/one.log" mpi 2 train $(train_args "$WORK/one") "${run[@]}"
seconds() { "$PY" -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$1"; }
start=$(date +%s.%N)
run_ok "two hosts, clean link" "$WORK/clean.log" two_hosts "$HPCTRAIN" train $(train_args "$WORK/clean") "${run[@]}"
echo "clean link: $(seconds "$start") s"

# shaped NAME QDISC...: QDISC on both ends of the link; a 2-host run; its weights == the one-host run's.
shaped() {
  local name=$1; shift
  ip netns exec "$HPT_NS_A" tc qdisc add dev "$VETH_A" root "$@" && ip netns exec "$HPT_NS_B" tc qdisc add dev "$VETH_B" root "$@" \
    || { bad "$name: tc qdisc add ... $*"; return; }
  local start
  start=$(date +%s.%N)
  run_ok "$name: two hosts" "$WORK/$name.log" two_hosts "$HPCTRAIN" train $(train_args "$WORK/$name") "${run[@]}"
  echo "$name: $(seconds "$start") s"
  local dropped
  dropped=$(ip netns exec "$HPT_NS_A" tc -s qdisc show dev "$VETH_A" | grep -o 'dropped [0-9]*' | head -1)
  [[ ${dropped#dropped } -gt 0 ]] && ok "$name: the link lost packets (host A's qdisc: $dropped)" || bad "$name: no packet lost ($dropped)"
  compare "$WORK/one/final/model.safetensors" "$WORK/$name/final/model.safetensors" 0 \
    && ok "$name: weights == one-host weights (bitwise)" || bad "$name: weights differ"
  ip netns exec "$HPT_NS_A" tc qdisc del dev "$VETH_A" root; ip netns exec "$HPT_NS_B" tc qdisc del dev "$VETH_B" root
}

if ip netns exec "$HPT_NS_A" tc qdisc add dev "$VETH_A" root netem delay 1ms 2>"$WORK/netem.err"; then
  ip netns exec "$HPT_NS_A" tc qdisc del dev "$VETH_A" root
  shaped netem netem loss 5% delay 50ms
else
  echo "SKIP: tc netem (loss 5% delay 50ms) unavailable: $(tr '\n' ' ' <"$WORK/netem.err")(no sch_netem in this kernel: CONFIG_NET_SCH_NETEM); shaping with tbf instead"
fi
shaped tbf tbf rate 2mbit burst 4kb limit 8kb
finish
