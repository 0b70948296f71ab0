# --threads far above the usable cores (issue 25, item 5; Note [Too many threads]): on 2 ranks, --threads 64
# warns once, naming --threads, the count, the usable cores and the ranks on the node; --threads 1 does not.
source "$(dirname "$0")/lib.sh"
make_fixture
# train_args without its --threads 1
args() { train_args "$1" | sed 's/--threads 1 //'; }
cpus=$(nproc)
usable=$((cpus / 2 > 0 ? cpus / 2 : 1))
run_ok "train 1 step with --threads 64" "$WORK/many.log" mpi 2 train $(args "$WORK/many") --threads 64 --max-steps 1 \
  --batch-size 8
warning="warning: --threads 64: more than twice the $usable core\(s\) each rank can use \($cpus CPU\(s\) this process may run on ÷ 2 rank\(s\) on this node\)"
count=$(grep -Ec -- "$warning" "$WORK/many.log")
[[ $cpus -ge 32 ]] && ok "(a machine with $cpus CPUs: 64 threads are not too many here)" ||
  { [[ $count -eq 1 ]] && ok "--threads 64 on $cpus CPUs warns once" || { bad "warned $count times"; grep -i thread "$WORK/many.log"; }; }
run_ok "train 1 step with --threads 1" "$WORK/one.log" mpi 2 train $(args "$WORK/one") --threads 1 --max-steps 1 \
  --batch-size 8
grep -q -- "warning: --threads" "$WORK/one.log" && { bad "--threads 1 warns"; grep -- "warning" "$WORK/one.log"; } || ok "--threads 1: no warning"
finish
