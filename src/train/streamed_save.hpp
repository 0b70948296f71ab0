// Writing checkpoint files tensor by tensor while every rank takes part in producing the tensors (Note [Streamed
// writes] in streamed_save.cpp). Private to src/train.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "hpctrain/dist/comm.hpp"
#include "hpctrain/io/safetensors.hpp"

namespace hpctrain::train {

// The tensors one file takes: `order`, the indices its writer asks for in turn (io::save_order,
// io::save_sharded_order); fetch(i), collective, tensor i as the file stores it on rank 0 (CPU, contiguous, its
// dtype; anything on the others).
struct StreamedPart {
  std::vector<std::size_t> order;
  std::function<at::Tensor(std::size_t index)> fetch;
};

// Collective (Note [Streamed writes]): rank 0 runs write(data), where data[p] gives part p's tensors to its
// writer; the other ranks fetch the same tensors in the same order and write nothing. The writer must ask for
// each part's tensors in its order, the parts one after the other. Agreed like dist::run_collectively: when
// write fails on rank 0 it still fetches what is left (no rank waits in a gather), then every rank throws the
// failure naming `what`.
void write_streamed(dist::Comm& comm, const std::string& what, const std::vector<StreamedPart>& parts,
                    const std::function<void(const std::vector<io::TensorData>& data)>& write);

}  // namespace hpctrain::train
