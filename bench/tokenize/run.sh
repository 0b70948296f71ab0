#!/usr/bin/env bash
# Tokenizer benchmark: hpctrain's BertTokenizer vs Hugging Face tokenizers (Rust, via its Python binding), bert-base-uncased,
# max_length 128, truncation on, no padding, on 1 thread and on all cores; checks that both give the same ids.
# Builds nothing; installs the pinned `tokenizers` into .venv-bench (HPCTRAIN_BENCH_VENV) on first use.
# Usage: bench/tokenize/run.sh BUILD_DIR [CORPUS_MB=24]
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 BUILD_DIR [CORPUS_MB]   (build first: cmake --build BUILD_DIR --target bench_tokenize)" >&2
  exit 2
fi
build_dir=$1
corpus_mb=${2:-24}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
bench_bin=$build_dir/bench/bench_tokenize
tokenizer_dir=$repo/data/bert-base-uncased

[[ -x $bench_bin ]] || { echo "error: $bench_bin not found; build it: cmake --build $build_dir --target bench_tokenize" >&2; exit 1; }
tokenizers_version=0.23.3  # the peer's version, pinned
venv=${HPCTRAIN_BENCH_VENV:-$repo/.venv-bench}
if ! "$venv/bin/python" -c "import tokenizers, sys; sys.exit(tokenizers.__version__ != '$tokenizers_version')" 2>/dev/null; then
  python3 -m venv "$venv" >&2 || { echo "error: 'python3 -m venv' failed (Debian: apt-get install python3-venv)" >&2; exit 1; }
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "tokenizers==$tokenizers_version" >&2
fi
python=$venv/bin/python

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" "$here/make_corpus.py" "$work/corpus.txt" "$corpus_mb"

cores=$(nproc)
# shellcheck source=../machine.sh
source "$here/../machine.sh"
print_machine
thread_counts=(1)
[[ $cores -gt 1 ]] && thread_counts+=("$cores")
for threads in "${thread_counts[@]}"; do
  "$bench_bin" --tokenizer "$tokenizer_dir" --corpus "$work/corpus.txt" --threads "$threads" \
    --ids-out "$work/hpctrain_$threads.ids" >> "$work/results.jsonl"
  "$python" "$here/hf_bench.py" --corpus "$work/corpus.txt" --vocab "$tokenizer_dir/vocab.txt" --threads "$threads" \
    --ids-out "$work/hf_$threads.ids" >> "$work/results.jsonl"
done

agree=yes
for threads in "${thread_counts[@]}"; do
  for ids in "$work/hpctrain_$threads.ids" "$work/hf_$threads.ids"; do
    if ! cmp -s "$ids" "$work/hf_1.ids"; then
      agree=no
      line=$(cmp "$ids" "$work/hf_1.ids" | awk '{print $NF}')
      echo "ids differ: $(basename "$ids") vs hf_1.ids at entry line $line" >&2
    fi
  done
done

"$python" "$here/report.py" "$work/results.jsonl" "$agree"
[[ $agree == yes ]]
