# scripts/gpu-check.sh check: a stage that fails (HPCTRAIN_GPU_CHECK_FAIL names it; its own process exits 1) does
# not stop the stages after it: each later stage still runs and passes, the summary lists the failure, the logs are
# packed, and the check as a whole exits non-zero. Dry run (stages print their command): no build, GPU or prefix.
# usage: bash test_failing_stage.sh REPO_ROOT
set -uo pipefail
repo=${1:?repository root}
work=$(mktemp -d /tmp/hpctrain-gpucheck.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

HPCTRAIN_GPU_DEPS=$work/deps HPCTRAIN_GPU_CHECK_DRY_RUN=1 HPCTRAIN_GPU_CHECK_FAIL=train-bf16-2ranks \
  "$repo/scripts/gpu-check.sh" check "$work/out" >"$work/check.log" 2>&1
rc=$?
summary=$work/out/check-summary.txt
cat "$summary" 2>/dev/null || cat "$work/check.log"
[[ $rc -ne 0 ]] && ok "the check exits non-zero ($rc)" || bad "the check exited 0 with a failed stage"
grep -Eq '^train-bf16-2ranks +FAILED' "$summary" && ok "the failing stage is listed FAILED" || bad "failing stage not listed"
grep -q '1 stage(s) failed' "$summary" && ok "one failure counted" || bad "failure count"
# Every stage after the failing one ran (its own process printed its dry-run line) and passed.
mapfile -t later < <(sed -n '/^train-bf16-2ranks /,$p' "$summary" | awk 'NR > 1 && NF >= 3 && $2 != "stage(s)" {print $1 " " $2}')
[[ ${#later[@]} -ge 10 ]] && ok "${#later[@]} stages after it in the summary" || bad "only ${#later[@]} stages after it"
for entry in "${later[@]}"; do
  [[ ${entry#* } == ok ]] || bad "later stage ${entry% *}: ${entry#* }"
done
grep -Eq '^memory +ok .*dry run: stage_memory' "$summary" && ok "the last stage ran in its own process" || bad "last stage"
# (tar's output read whole first: `tar | grep -q` under pipefail fails when grep stops reading early.)
listing=$(tar tzf "$work/out/check-logs.tar.gz")
grep -q 'train-bf16-2ranks.log' <<<"$listing" && ok "stage logs packed" || bad "no stage logs"
failing_log=$(tar xzf "$work/out/check-logs.tar.gz" -O --wildcards '*train-bf16-2ranks.log')
grep -q 'failing on purpose' <<<"$failing_log" && ok "the failing stage's log says why" || bad "failing stage's log"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
