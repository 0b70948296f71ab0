// libFuzzer target: SafetensorsFile on arbitrary bytes. Either Error, or a file whose tensors tile the data area
// exactly, each with the byte count its shape and dtype need (Note [Tensors tile the data area]).
#include "fuzz_util.hpp"
#include "hpctrain/io/safetensors.hpp"

#include <fmt/format.h>

using hpctrain::io::SafetensorsFile;

namespace {

void check_accepted(const SafetensorsFile& file, std::size_t size) {
  HPCTRAIN_FUZZ_ASSERT(8 + file.header_bytes() + file.data_bytes() == size, "header + data != file size");
  const std::byte* next = nullptr;
  std::uint64_t covered = 0;
  for (const auto& tensor : file.tensors()) {
    const auto expected = hpctrain::io::checked_nbytes(tensor.shape, tensor.dtype);
    HPCTRAIN_FUZZ_ASSERT(expected.has_value() && *expected == tensor.nbytes, tensor.name);
    HPCTRAIN_FUZZ_ASSERT(next == nullptr || tensor.data == next, fmt::format("'{}' does not follow its neighbour", tensor.name));
    HPCTRAIN_FUZZ_ASSERT(&file.tensor(tensor.name) == &tensor, tensor.name);
    next = tensor.data + tensor.nbytes;
    covered += tensor.nbytes;
  }
  HPCTRAIN_FUZZ_ASSERT(covered == file.data_bytes(), "tensors do not cover the data area");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const hpctrain::fuzz::TempFile file("model.safetensors");
  file.write(data, size);
  hpctrain::fuzz::expect_errors([&] {
    const SafetensorsFile parsed(file.path());
    check_accepted(parsed, size);
    (void)parsed.tensor("no such tensor");  // the error path that lists names
  });
  return 0;
}
