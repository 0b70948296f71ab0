#!/usr/bin/env bash
# Tokenizer benchmark: hpctrain's BertTokenizer vs Hugging Face tokenizers (Rust, via Node.js), bert-base-uncased,
# max_length 128, truncation on, no padding, on 1 thread and on all cores; checks that both give the same ids.
# Builds nothing. Usage: bench/tokenize/run.sh BUILD_DIR [CORPUS_MB=24]
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
if [[ ! -d $here/node_modules/tokenizers ]]; then
  (cd "$here" && npm ci --no-audit --no-fund >&2)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node "$here/make_corpus.js" "$work/corpus.txt" "$corpus_mb"

cores=$(nproc)
thread_counts=(1)
[[ $cores -gt 1 ]] && thread_counts+=("$cores")
for threads in "${thread_counts[@]}"; do
  "$bench_bin" --tokenizer "$tokenizer_dir" --corpus "$work/corpus.txt" --threads "$threads" \
    --ids-out "$work/hpctrain_$threads.ids" >> "$work/results.jsonl"
  node "$here/hf_bench.js" --corpus "$work/corpus.txt" --vocab "$tokenizer_dir/vocab.txt" --threads "$threads" \
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

node - "$work/results.jsonl" "$agree" <<'JS'
const fs = require('fs');
const [file, agree] = process.argv.slice(2);
const rows = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const first = rows[0];
console.log(`corpus: ${(first.bytes / 1e6).toFixed(1)} MB, ${first.entries} texts (fortunes), bert-base-uncased, max_length 128`);
console.log('| implementation | threads | MB/s | MB per CPU-second | hpctrain / HF (MB/s) | hpctrain / HF (CPU) |');
console.log('|---|---:|---:|---:|---:|---:|');
for (const row of rows) {
  const hf = rows.find((r) => r.impl !== 'hpctrain' && r.threads === row.threads);
  const ratio = (key) => (row.impl === 'hpctrain' && hf ? (row[key] / hf[key]).toFixed(1) + 'x' : '');
  console.log(`| ${row.impl} | ${row.threads} | ${row.mb_per_s.toFixed(1)} | ${row.mb_per_cpu_s.toFixed(1)} | ` +
    `${ratio('mb_per_s')} | ${ratio('mb_per_cpu_s')} |`);
}
console.log(`ids agree on every text (all runs): ${agree}`);
JS
[[ $agree == yes ]]
