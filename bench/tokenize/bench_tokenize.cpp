// Tokenizer throughput: encodes every entry of a corpus (NUL-separated UTF-8 texts) with BertTokenizer at
// max_length 128 (no padding) on N threads; prints one JSON line with MB/s of input text (per wall-clock second
// and per CPU second, best of --repeat runs) and writes per-entry id
// checksums ("<count> <h1> <h2>", as bench/tokenize/hf_bench.js does) so run.sh can compare with Hugging Face.
// Usage: bench_tokenize --tokenizer DIR --corpus FILE --threads N [--repeat 3] [--max-length 128] [--ids-out FILE]
#include "hpctrain/core/error.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using hpctrain::tokenize::BertTokenizer;
using hpctrain::tokenize::Encoding;

struct Options {
  std::string tokenizer_dir, corpus, ids_out;
  int threads = 1, repeat = 3, max_length = 128;
};

Options parse_options(int argc, char** argv) {
  std::map<std::string, std::string> values;
  for (int i = 1; i + 1 < argc; i += 2) values[argv[i]] = argv[i + 1];
  HPCTRAIN_CHECK(argc % 2 == 1, "arguments come in '--name value' pairs");
  auto get = [&](const std::string& name, const std::string& fallback) {
    const auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  };
  Options o;
  o.tokenizer_dir = get("--tokenizer", "");
  o.corpus = get("--corpus", "");
  o.ids_out = get("--ids-out", "");
  o.threads = std::stoi(get("--threads", "1"));
  o.repeat = std::stoi(get("--repeat", "3"));
  o.max_length = std::stoi(get("--max-length", "128"));
  HPCTRAIN_CHECK(!o.tokenizer_dir.empty() && !o.corpus.empty(), "--tokenizer DIR and --corpus FILE are required");
  HPCTRAIN_CHECK(o.threads >= 1 && o.repeat >= 1, "--threads and --repeat must be at least 1");
  return o;
}

std::vector<std::string_view> split_entries(const std::string& corpus) {
  std::vector<std::string_view> entries;
  size_t start = 0;
  for (size_t end; (end = corpus.find('\0', start)) != std::string::npos; start = end + 1) {
    entries.emplace_back(corpus.data() + start, end - start);
  }
  entries.emplace_back(corpus.data() + start, corpus.size() - start);
  return entries;
}

// The same checksum as hf_bench.js: count, FNV-1a over 32-bit ids, multiplicative hash (mod 2^32).
std::string checksum(const std::vector<int32_t>& ids) {
  uint32_t h1 = 0x811c9dc5u, h2 = 0;
  for (int32_t id : ids) {
    h1 = (h1 ^ uint32_t(id)) * 16777619u;
    h2 = h2 * 31u + uint32_t(id);
  }
  return fmt::format("{} {:x} {:x}", ids.size(), h1, h2);
}

struct Timing {
  double wall_seconds;
  double cpu_seconds;  // all threads of the process
};

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Encodes all entries on `threads` threads (blocks of entries handed out by an atomic counter).
Timing encode_all(const BertTokenizer& tokenizer, const std::vector<std::string_view>& entries, int threads,
                  int max_length, std::vector<std::vector<int32_t>>* ids) {
  constexpr size_t kBlock = 256;
  std::atomic<size_t> next{0};
  auto work = [&] {
    Encoding encoding;
    for (size_t first; (first = next.fetch_add(kBlock)) < entries.size();) {
      for (size_t i = first; i < std::min(entries.size(), first + kBlock); ++i) {
        tokenizer.encode_into(entries[i], std::nullopt, max_length, encoding);
        if (ids) (*ids)[i] = encoding.input_ids;
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          process_cpu_seconds() - cpu_start};
}

void run(const Options& o) {
  std::ifstream in(o.corpus, std::ios::binary);
  HPCTRAIN_CHECK(in.good(), "{}: cannot open corpus", o.corpus);
  const std::string corpus((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string_view> entries = split_entries(corpus);
  const BertTokenizer tokenizer = BertTokenizer::from_pretrained(o.tokenizer_dir);
  encode_all(tokenizer, {entries.begin(), entries.begin() + std::min<size_t>(2000, entries.size())}, o.threads,
             o.max_length, nullptr);  // warm-up
  Timing best{1e300, 1e300};
  for (int r = 0; r < o.repeat; ++r) {
    const Timing t = encode_all(tokenizer, entries, o.threads, o.max_length, nullptr);
    best = {std::min(best.wall_seconds, t.wall_seconds), std::min(best.cpu_seconds, t.cpu_seconds)};
  }
  if (!o.ids_out.empty()) {
    std::vector<std::vector<int32_t>> ids(entries.size());
    encode_all(tokenizer, entries, o.threads, o.max_length, &ids);
    std::ofstream out(o.ids_out);
    for (const auto& one : ids) out << checksum(one) << '\n';
  }
  const double megabytes = double(corpus.size()) / 1e6;
  const nlohmann::json result = {{"impl", "hpctrain"},
                                 {"threads", o.threads},
                                 {"seconds", best.wall_seconds},
                                 {"cpu_seconds", best.cpu_seconds},
                                 {"bytes", corpus.size()},
                                 {"entries", entries.size()},
                                 {"mb_per_s", megabytes / best.wall_seconds},
                                 {"mb_per_cpu_s", megabytes / best.cpu_seconds}};
  std::cout << result.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    run(parse_options(argc, argv));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_tokenize: error: %s\n", e.what());
    return 1;
  }
}
