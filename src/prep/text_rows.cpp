// `prep text` rows: the per-record checks, this rank's byte range of an input, and block tokenization.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/collective.hpp"
#include "hpctrain/tokenize/bert_tokenizer.hpp"
#include "hpctrain/tokenize/utf8.hpp"
#include "prep_common.hpp"
#include "text_prep_parts.hpp"

namespace hpctrain::prep::detail {

RowChecker::RowChecker(const TextPrepOptions& options) : options_(options), forced_(options.labels) {
  std::sort(forced_.begin(), forced_.end());
}

std::vector<std::string> RowChecker::field_names() const {
  std::vector<std::string> fields = {options_.text_field, options_.label_field};
  if (!options_.text_pair_field.empty()) fields.push_back(options_.text_pair_field);
  return fields;
}

std::optional<RawExample> RowChecker::check(data::TextRecord& record, std::map<std::string, int64_t>& skipped,
                                            std::optional<BadRow>& bad) const {
  auto reject = [&](const char* reason, std::string detail) -> std::optional<RawExample> {
    if (options_.skip_invalid) ++skipped[reason];
    else bad = BadRow{record.line, record.row, std::move(detail)};
    return std::nullopt;
  };
  if (!record.error.empty()) return reject("malformed row", record.error);
  const std::string* field_names[3] = {&options_.text_field, &options_.label_field, &options_.text_pair_field};
  for (std::size_t i = 0; i < record.fields.size(); ++i) {
    if (!record.fields[i]) return reject("missing field", fmt::format("missing field '{}'", *field_names[i]));
  }
  RawExample example;
  example.text = std::move(*record.fields[0]);
  example.label = std::move(*record.fields[1]);
  if (record.fields.size() > 2) example.pair = std::move(*record.fields[2]);
  example.source_index = record.row;
  example.replaced_invalid_utf8 = record.replaced_invalid_utf8;
  if (is_blank(example.text)) return reject("empty text", fmt::format("empty text in field '{}'", options_.text_field));
  if (record.fields.size() > 2 && is_blank(example.pair))
    return reject("empty text", fmt::format("empty text in field '{}'", options_.text_pair_field));
  if (example.label.empty()) return reject("missing field", fmt::format("empty label in field '{}'", options_.label_field));
  if (!forced_.empty() && !std::binary_search(forced_.begin(), forced_.end(), example.label))
    return reject("label not in --labels",
                  fmt::format("label '{}' is not in --labels ({})", example.label, fmt::join(options_.labels, ",")));
  return example;
}

std::string bad_row_message(const std::filesystem::path& path, const BadRow& bad) {
  return fmt::format("{}: line {} (row {}): {}\n  hint: fix the row, or pass --skip-invalid to skip bad rows and count them by reason",
                     path.string(), bad.line, bad.row, bad.detail);
}

// Note [Record ranges]: rank r's part begins at the first record boundary at or after r/N of the file. The
// quote parity and the line number there come from every rank counting '"' and '\n' in its own N-th.
data::TextReaderOptions input_range(const std::filesystem::path& path, dist::Comm& comm) {
  data::TextReaderOptions range;
  const int ranks = comm.world_size(), rank = comm.rank();
  if (ranks == 1) return range;
  std::vector<data::ByteCounts> counts(static_cast<std::size_t>(ranks));
  const uint64_t size = std::filesystem::file_size(path);
  auto nominal = [&](int r) { return size / static_cast<uint64_t>(ranks) * static_cast<uint64_t>(r) + std::min<uint64_t>(r, size % ranks); };
  dist::run_collectively(comm, fmt::format("prep text: splitting '{}' into ranges", path.string()), [&] {
    counts[static_cast<std::size_t>(rank)] = data::count_quotes_and_newlines(path, nominal(rank), nominal(rank + 1));
  });
  const data::ByteCounts mine = counts[static_cast<std::size_t>(rank)];
  comm.allgather(&mine, sizeof mine, counts.data());
  const bool csv = data::text_format_from_path(path) != data::TextFormat::jsonl;
  auto boundary = [&](int r) {
    if (r == ranks) return data::RecordBoundary{size, 0};
    int64_t quotes = 0;
    for (int k = 0; k < r; ++k) quotes += counts[static_cast<std::size_t>(k)].quotes;
    return data::find_record_boundary(path, nominal(r), csv, quotes % 2 == 1);
  };
  dist::run_collectively(comm, fmt::format("prep text: finding record boundaries in '{}'", path.string()), [&] {
    const auto first = boundary(rank);
    range.range_begin = first.offset;
    range.range_end = boundary(rank + 1).offset;
    range.first_line = 1 + first.newlines;
    for (int k = 0; k < rank; ++k) range.first_line += counts[static_cast<std::size_t>(k)].newlines;
  });
  return range;
}

data::TextExamples tokenize_rows(const std::vector<RawExample>& rows, const std::vector<int64_t>& label_ids,
                                 const tokenize::BertTokenizer& tokenizer, int max_length, bool pairs, int threads,
                                 TokenizeCounts& counts) {
  constexpr std::size_t kChunk = 512;
  const std::size_t n = rows.size(), chunks = (n + kChunk - 1) / kChunk;
  std::vector<data::TextExamples> pieces(chunks);
  std::vector<TokenizeCounts> piece_counts(chunks);
  static const std::vector<uint8_t> kNoTypes;
  parallel_chunks(chunks, threads, [&](std::size_t c) {
    tokenize::Encoding encoding;
    for (std::size_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) {
      const RawExample& row = rows[i];
      // The tokenizer reads invalid UTF-8 as U+FFFD (then drops it); here we only count such rows.
      const bool valid = tokenize::utf8::is_valid(row.text) && (!pairs || tokenize::utf8::is_valid(row.pair));
      piece_counts[c].invalid_utf8 += valid && !row.replaced_invalid_utf8 ? 0 : 1;
      tokenizer.encode_into(row.text, pairs ? std::optional<std::string_view>(row.pair) : std::nullopt, max_length,
                            encoding);
      piece_counts[c].truncated += encoding.truncated ? 1 : 0;
      pieces[c].append(encoding.input_ids, pairs ? encoding.token_type_ids : kNoTypes, label_ids[i], row.source_index);
    }
  });
  data::TextExamples out;
  for (std::size_t c = 0; c < chunks; ++c) {
    out.append_all(pieces[c]);
    counts.invalid_utf8 += piece_counts[c].invalid_utf8;
    counts.truncated += piece_counts[c].truncated;
  }
  return out;
}

}  // namespace hpctrain::prep::detail
