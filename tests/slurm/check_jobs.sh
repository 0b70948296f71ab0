# jobs/*.sbatch without a cluster: every script and jobs/lib.sh pass `bash -n`, every #SBATCH line has a
# comment, and each script refuses to run outside Slurm (exit 2, a hint naming sbatch) before doing anything.
# `bash check_jobs.sh REPO`.
REPO=${1:?repository root}
passed=0 failed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }
scripts=("$REPO"/jobs/*.sbatch)
[[ ${#scripts[@]} -ge 5 ]] && ok "${#scripts[@]} batch scripts" || bad "expected 5 jobs/*.sbatch, found ${#scripts[@]}"
for file in "${scripts[@]}" "$REPO/jobs/lib.sh" "$REPO/scripts/slurm-local.sh"; do
  bash -n "$file" && ok "bash -n $(basename "$file")" || bad "bash -n $file"
done
for file in "${scripts[@]}"; do
  name=$(basename "$file")
  uncommented=$(grep -nE '^#SBATCH' "$file" | grep -vE '^[0-9]+:#SBATCH [^#]+ +# [^ ]' || true)
  [[ -z "$uncommented" ]] && ok "$name: every #SBATCH line commented" || bad "$name: uncommented: $uncommented"
  out=$(env -u SLURM_JOB_ID HPCTRAIN=/nonexistent bash "$file" --help 2>&1)
  status=$?
  [[ $status -eq 2 && "$out" == *"not inside a Slurm job"*"sbatch jobs/$name"* ]] && ok "$name: refuses outside Slurm" \
    || bad "$name outside Slurm: exit $status, output: $out"
done
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
