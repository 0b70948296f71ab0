#!/usr/bin/env bash
# A stand-in for hpctrain in test_requeue_protocol.sh: records its arguments and Slurm rank, and on USR1
# exits 75 like hpctrain's "stopped early, checkpoint saved" (one line per event in $FAKE_LOG.PROCID).
log="$FAKE_LOG.${SLURM_PROCID:-0}"
echo "start restart=${SLURM_RESTART_COUNT:-0} args=$*" >>"$log"
trap 'echo "usr1" >>"$log"; exit 75' USR1
for arg in "$@"; do [[ "$arg" == auto ]] && { echo "resumed" >>"$log"; exit 0; }; done
for _ in $(seq 200); do sleep 0.1; done
echo "timeout" >>"$log"
exit 1
