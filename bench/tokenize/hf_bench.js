// Hugging Face tokenizers side of the benchmark: BertTokenizerFast(bert-base-uncased) settings, max_length 128
// truncation, no padding, encodeBatch over the corpus on --threads rayon threads. Prints one JSON line (MB/s per
// wall-clock and per CPU second, best of --repeat runs); writes "<count> <h1> <h2>" per entry (checksums of the ids, as bench_tokenize.cpp does) to --ids-out.
// Usage: node hf_bench.js --corpus FILE --vocab VOCAB_TXT --threads N [--repeat 3] [--max-length 128] [--ids-out FILE]
'use strict';
const fs = require('fs');
const path = require('path');

const BATCH = 4096;  // entries per encodeBatch call

function args() {
  const a = { repeat: 3, 'max-length': 128 };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const required of ['corpus', 'vocab', 'threads']) if (!a[required]) throw new Error(`missing --${required}`);
  return a;
}

// Checksum of one id sequence: count, FNV-1a over 32-bit ids, and a multiplicative hash (both mod 2^32).
function checksum(ids) {
  let h1 = 0x811c9dc5, h2 = 0;
  for (const id of ids) {
    h1 = Math.imul(h1 ^ id, 16777619) >>> 0;
    h2 = (Math.imul(h2, 31) + id) >>> 0;
  }
  return `${ids.length} ${h1.toString(16)} ${h2.toString(16)}`;
}

async function encodeAll(tokenizer, entries) {
  const out = [];
  for (let i = 0; i < entries.length; i += BATCH) out.push(...(await tokenizer.encodeBatch(entries.slice(i, i + BATCH))));
  return out;
}

async function main() {
  const a = args();
  // tokenizers runs encodeBatch on rayon's global pool, sized from RAYON_NUM_THREADS when first used.
  process.env.RAYON_NUM_THREADS = String(a.threads);
  process.env.TOKENIZERS_PARALLELISM = 'true';
  const reference = require(path.join(__dirname, '../../tests/tokenize/golden/reference.js'))(require('tokenizers'));
  const bytes = fs.readFileSync(a.corpus);
  const entries = bytes.toString('utf8').split('\0');
  const tokenizer = reference.buildBertTokenizer(reference.readVocab(a.vocab), reference.VARIANTS.uncased);
  reference.setMaxLength(tokenizer, Number(a['max-length']));
  await encodeAll(tokenizer, entries.slice(0, 2000));  // warm-up
  let best = Infinity, bestCpu = Infinity, encodings;
  for (let r = 0; r < Number(a.repeat); r++) {
    const start = process.hrtime.bigint(), cpuStart = process.cpuUsage();
    encodings = await encodeAll(tokenizer, entries);
    const cpu = process.cpuUsage(cpuStart);  // all threads of the process, microseconds
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e9);
    bestCpu = Math.min(bestCpu, (cpu.user + cpu.system) / 1e6);
  }
  if (a['ids-out']) fs.writeFileSync(a['ids-out'], encodings.map((e) => checksum(e.getIds())).join('\n') + '\n');
  console.log(JSON.stringify({ impl: `HF tokenizers ${require('tokenizers/package.json').version} (node)`,
    threads: Number(a.threads), seconds: best, cpu_seconds: bestCpu, bytes: bytes.length, entries: entries.length,
    mb_per_s: bytes.length / 1e6 / best, mb_per_cpu_s: bytes.length / 1e6 / bestCpu }));
}

main().catch((e) => { console.error(e); process.exit(1); });
