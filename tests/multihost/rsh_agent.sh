#!/usr/bin/env bash
# Open MPI's rsh agent for test_two_hosts.sh: `rsh_agent.sh HOST COMMAND...` runs COMMAND on the "host"
# HOST by entering its network namespace instead of ssh (HPT_NS_A serves 10.77.0.1, HPT_NS_B 10.77.0.2).
host=$1; shift
case "$host" in
  10.77.0.1) ns=$HPT_NS_A ;;
  10.77.0.2) ns=$HPT_NS_B ;;
  *) echo "rsh_agent.sh: unknown host '$host' (expected 10.77.0.1 or 10.77.0.2)" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" bash -c "$*"
