// Private: the contract between TextRecordReader (which owns the buffer) and the per-format record parsers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpctrain::data::detail {

// What a parser made of the bytes at the front of the reader's buffer.
enum class ScanStatus {
  record,     // one record (possibly malformed) was parsed
  blank,      // one blank line was skipped
  need_more,  // the record may continue past the end of the buffer: refill and parse it again from its start
};

struct Scan {
  ScanStatus status = ScanStatus::need_more;
  std::size_t bytes = 0;      // bytes consumed: the record with its line terminator, or up to the resync point
  std::int64_t newlines = 0;  // physical line breaks inside those bytes
};

}  // namespace hpctrain::data::detail
