// write_streamed (streamed_save.hpp).
#include "streamed_save.hpp"

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/collective.hpp"

// Note [Streamed writes]
// A checkpoint's model.safetensors and optimizer.safetensors are written one tensor at a time: the safetensors
// header needs only names, dtypes and shapes (io::save_safetensors with a TensorData callback), and the writer
// asks for each tensor's bytes just before it writes them, in an order fixed beforehand (dtype, then name:
// io::save_order; per shard file: io::save_sharded_order). Producing a tensor may be collective: at --zero-stage
// 3 a parameter is gathered with its unit (Strategy::make_whole, which releases the unit gathered before it), at
// stages 1-3 an optimizer state tensor is gathered from its slices (ZeroOptimizer::gather_state_tensor). So every
// rank walks the same order: rank 0 inside the writer, the others on their own, and rank 0 holds one tensor (and
// one unit) besides its shards instead of the whole model and optimizer state, and the files are byte for byte
// the ones written from whole tensors. A failed write on rank 0 (a full disk) still fetches the rest, so that
// the others leave their gathers; then every rank reports it (Note [Agree on the first failure]).
namespace hpctrain::train {

void write_streamed(dist::Comm& comm, const std::string& what, const std::vector<StreamedPart>& parts,
                    const std::function<void(const std::vector<io::TensorData>& data)>& write) {
  std::size_t part = 0, next = 0;  // the next fetch every rank makes: parts[part].order[next]
  const auto advance = [&] {
    ++next;
    while (part < parts.size() && next == parts[part].order.size()) ++part, next = 0;
  };
  while (part < parts.size() && parts[part].order.empty()) ++part;
  const auto fetch_rest = [&] {
    while (part < parts.size()) {
      (void)parts[part].fetch(parts[part].order[next]);
      advance();
    }
  };
  dist::run_collectively(comm, what, [&] {
    if (!comm.is_main_process()) return fetch_rest();
    at::Tensor held;  // the bytes data() returned last, kept until the writer asks again
    std::vector<io::TensorData> data;
    for (std::size_t p = 0; p < parts.size(); ++p) {
      data.push_back([&, p](std::size_t index) {
        HPCTRAIN_CHECK(p == part && next < parts[p].order.size() && parts[p].order[next] == index, "{}: the writer "
                       "asked for tensor {} of file {} out of the agreed order", what, index, p);
        held = parts[p].fetch(index);
        advance();
        return static_cast<const std::byte*>(held.data_ptr());
      });
    }
    try {
      write(data);
    } catch (...) {
      held = at::Tensor();
      fetch_rest();
      throw;
    }
    HPCTRAIN_CHECK(part == parts.size(), "{}: the writer left tensors of file {} unwritten", what, part);
  });
}

}  // namespace hpctrain::train
