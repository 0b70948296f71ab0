# Helpers for the CLI tests: each test script is `bash test_x.sh HPCTRAIN_BINARY REPO_ROOT`.
set -uo pipefail
HPCTRAIN=${1:?hpctrain binary}
REPO=${2:?repository root}
WORK=$(mktemp -d /tmp/hpctrain-cli.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
TOKENIZER="$REPO/data/bert-base-uncased"
passed=0
failed=0

ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAILED: $1"; failed=$((failed + 1)); }

# expect_success NAME CMD...: the command exits 0.
expect_success() {
  local name=$1; shift
  if "$@" >"$WORK/out" 2>"$WORK/err"; then ok "$name"; else bad "$name (exit $?)"; cat "$WORK/out" "$WORK/err"; fi
}

# expect_failure NAME PATTERN CMD...: the command exits non-zero and stderr matches the extended regex PATTERN.
expect_failure() {
  local name=$1 pattern=$2; shift 2
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [[ $rc -eq 0 ]]; then bad "$name: exit 0, expected failure"; cat "$WORK/err"; return; fi
  if grep -Eq -- "$pattern" "$WORK/err"; then ok "$name"; else bad "$name: stderr does not match /$pattern/"; cat "$WORK/err"; fi
}

# expect_no_file NAME PATH: PATH does not exist, and no temporary beside it either.
expect_no_file() {
  local name=$1 path=$2
  local leftovers
  leftovers=$(ls "$(dirname "$path")" | grep -F "$(basename "$path")" || true)
  if [[ -z "$leftovers" ]]; then ok "$name"; else bad "$name: found $leftovers"; fi
}

finish() {
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}
