# Two "hosts" on one machine for the multihost tests (docs/two-hosts-netns.md): sourced after
# tests/mpi_train/lib.sh (WORK, ok, bad, finish). `netns_setup` makes two network namespaces joined by a
# veth pair (10.77.0.1 in $HPT_NS_A, 10.77.0.2 in $HPT_NS_B; the addresses exist only inside them), or
# exits 77 (skip) without root or `ip netns` permission; `two_hosts CMD...` runs CMD on one rank per
# namespace, Open MPI over TCP on the veth only. The EXIT trap ends every process left in the namespaces
# (by pid: `ip netns pids`), then removes them (the veth pair goes with them) and $WORK.
HERE_MH="$REPO/tests/multihost"
export HPT_NS_A="hpt-a-$$" HPT_NS_B="hpt-b-$$"
VETH_A="hpa$$" VETH_B="hpb$$"   # interface names: at most 15 characters

# netns_pids: the processes running inside this test's namespaces (its ranks, mpirun, Open MPI's daemons).
netns_pids() { ip netns pids "$HPT_NS_A" 2>/dev/null; ip netns pids "$HPT_NS_B" 2>/dev/null; }
netns_cleanup() {
  local pids
  pids=$(netns_pids)
  [[ -n "$pids" ]] && kill -KILL $pids 2>/dev/null
  kill_runs
  ip netns del "$HPT_NS_A" 2>/dev/null; ip netns del "$HPT_NS_B" 2>/dev/null
  [[ -n "${HPCTRAIN_KEEP_WORK:-}" ]] || rm -rf "$WORK"
}

netns_setup() {
  command -v ip >/dev/null || { echo "SKIP: no ip command (apt-get install iproute2)"; exit 77; }
  [[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root for ip netns"; exit 77; }
  trap netns_cleanup EXIT
  if ! ip netns add "$HPT_NS_A" 2>"$WORK/netns.err"; then
    echo "SKIP: cannot create a network namespace: $(cat "$WORK/netns.err")"; exit 77
  fi
  ip netns add "$HPT_NS_B" && ip link add "$VETH_A" type veth peer name "$VETH_B" \
    && ip link set "$VETH_A" netns "$HPT_NS_A" && ip link set "$VETH_B" netns "$HPT_NS_B" \
    && ip -n "$HPT_NS_A" addr add 10.77.0.1/24 dev "$VETH_A" && ip -n "$HPT_NS_B" addr add 10.77.0.2/24 dev "$VETH_B" \
    && ip -n "$HPT_NS_A" link set "$VETH_A" up && ip -n "$HPT_NS_B" link set "$VETH_B" up \
    && ip -n "$HPT_NS_A" link set lo up && ip -n "$HPT_NS_B" link set lo up \
    && ok "namespaces $HPT_NS_A, $HPT_NS_B joined by $VETH_A/$VETH_B" || { bad "network set-up"; finish; exit 1; }
  printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$WORK/hosts"
}

# link_down / link_up: the cable between the hosts (host A's end of the veth pair; B's end goes down with it).
link_down() { ip -n "$HPT_NS_A" link set "$VETH_A" down; }
link_up() { ip -n "$HPT_NS_A" link set "$VETH_A" up; }

# two_hosts CMD...: mpirun in namespace A, one rank per host (the rsh agent starts host B's daemon).
two_hosts() {
  ip netns exec "$HPT_NS_A" "$MPIEXEC" --hostfile "$WORK/hosts" -np 2 --map-by node --bind-to none \
    --mca plm_rsh_agent "$HERE_MH/rsh_agent.sh" --mca btl tcp,self \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 "$@"
}

# two_hosts "${PER_RANK_STDERR[@]}" PREFIX CMD...: CMD with each rank's stderr in PREFIX.RANK. A rank cut
# off from mpirun's host cannot forward its output to mpirun until the link returns; its own file has it.
PER_RANK_STDERR=(bash -c 'exec "$@" 2>"$0.$OMPI_COMM_WORLD_RANK"')

# ranks_alive: how many hpctrain processes run in this test's namespaces.
ranks_alive() {
  local pids
  pids=$(netns_pids)
  [[ -z "$pids" ]] && { echo 0; return; }
  ps -o comm= -p $pids 2>/dev/null | grep -c '^hpctrain$'
}

# wait_for_path PATH SECONDS PID: waits until PATH (a glob) exists; false after SECONDS or once PID ended.
wait_for_path() {
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)) && kill -0 "$3" 2>/dev/null; do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.05
  done
  compgen -G "$1" >/dev/null
}

# cut_link_when PATH PID LOG: once PATH (a glob) exists, takes the link down; sets CUT_AT (date +%s.%N) either
# way and returns false (LOG's tail shown) when PATH never appeared while PID ran.
cut_link_when() {
  if wait_for_path "$1" 120 "$2"; then
    link_down
    CUT_AT=$(date +%s.%N)
    return 0
  fi
  CUT_AT=$(date +%s.%N)
  tail -20 "$3"
  return 1
}

# resumes_exactly RUN...: after the link is back, `--resume auto` of $WORK/cut on the two hosts continues at
# checkpoint-20 and ends with the weights of the uninterrupted $WORK/whole, bitwise.
resumes_exactly() {
  run_ok "link up: --resume auto on the two hosts" "$WORK/resume.log" \
    two_hosts "$HPCTRAIN" train $(train_args "$WORK/cut") "$@" --resume auto
  grep -q "resuming at step 20" "$WORK/resume.log" && ok "resumed from checkpoint-20" \
    || { bad "resume point"; grep -i "resum\|checkpoint" "$WORK/resume.log" | head; }
  compare "$WORK/whole/final/model.safetensors" "$WORK/cut/final/model.safetensors" 0 \
    && ok "resumed weights == uninterrupted weights (bitwise)" || bad "resumed weights differ"
}

# ranks_end_within LABEL LIMIT START: every rank ends within LIMIT seconds of START (date +%s.%N);
# sets ENDED_AFTER to the seconds it took.
ranks_end_within() {
  local label=$1 limit=$2 start=$3
  while [[ $(ranks_alive) -gt 0 ]] && (($(date +%s) - ${start%.*} < limit + 30)); do sleep 0.2; done
  ENDED_AFTER=$("$PY" -c "import sys, time; print(f'{time.time() - float(sys.argv[1]):.1f}')" "$start")
  if [[ $(ranks_alive) -eq 0 ]] && "$PY" -c "import sys; sys.exit(float(sys.argv[1]) > float(sys.argv[2]))" "$ENDED_AFTER" "$limit"; then
    ok "$label: every rank ended ${ENDED_AFTER} s after the fault (limit $limit s)"
  else
    bad "$label: ranks still alive or ended late (${ENDED_AFTER} s, limit $limit s; $(ranks_alive) alive)"
  fi
}

# launcher_ends_after_link_up LABEL PID: mpirun (PID) waits for its lost daemon while the link is down
# (Open MPI's out-of-band channel; the ranks have ended already); once the link is back it ends, non-zero.
# Bounded: killed after 30 s (reported). Sets LAUNCHER_RC.
launcher_ends_after_link_up() {
  local label=$1 pid=$2
  link_up
  for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "note: $label: mpirun still waits 30 s after the link returned; killed"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"
  LAUNCHER_RC=$?
  [[ $LAUNCHER_RC -ne 0 ]] && ok "$label: the job's exit status is non-zero ($LAUNCHER_RC)" \
    || bad "$label: the job exited 0 after losing a host"
}

# names_lost_peer LABEL PREFIX: rank 0's stderr (PREFIX.0) names rank 1 and the operation it waited in,
# rank 1's names rank 0.
names_lost_peer() {
  local label=$1 prefix=$2 r peer
  for r in 0 1; do
    peer=$((1 - r))
    if grep -Eq "^\[rank $r\] error: collective timeout: (allreduce|broadcast|barrier|allgather) #[0-9]+.* did not complete within .*no answer from rank $peer on [^ ]+ \(its process stopped, or its node or the network to it is down\?\)" \
      "$prefix.$r"; then ok "$label: rank $r names the lost peer (rank $peer, its node) and the operation"
    else bad "$label: rank $r's message"; cat "$prefix.$r"; fi
  done
}

# checkpoints_intact LABEL OUT: every checkpoint-STEP folder in OUT verifies with `sha256sum -c` of its
# checksums.sha256 (no partial checkpoint under a real name).
checkpoints_intact() {
  local label=$1 out=$2 dir all_ok=1 n=0
  for dir in "$out"/checkpoint-*; do
    [[ -d "$dir" ]] || continue
    n=$((n + 1))
    if ! [[ -f "$dir/checksums.sha256" ]] || ! (cd "$dir" && sha256sum --quiet -c checksums.sha256); then
      all_ok=0; echo "  not intact: $dir"
    fi
  done
  [[ $n -gt 0 && $all_ok -eq 1 ]] && ok "$label: $n checkpoint(s), each verified by sha256sum -c" || bad "$label: checkpoints ($n)"
}
