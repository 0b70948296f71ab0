// Keeping replicas identical across ranks: the initial broadcast from rank 0, a check that every
// rank built the same parameters, and a checksum comparison for --check-sync-every.
// All functions are collective: every rank calls them at the same point, and an error is thrown on
// every rank or on none (so no rank is left waiting in a collective).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hpctrain/ddp/named_tensors.hpp"
#include "hpctrain/dist/comm.hpp"

namespace hpctrain::ddp {

// Copies every tensor (parameters and buffers, any dtype and device) from `root` into the same tensor
// on every other rank, packed into fused byte buffers of at most 64 MiB per broadcast. Every rank
// passes the same shapes and dtypes in the same order (see check_same_structure); a different tensor
// count or byte total is an error on every rank.
void broadcast_parameters(dist::Comm& comm, const std::vector<at::Tensor>& tensors, int root = 0);

// `tensors` (CPU) as held by `root` arrive on every rank: names, shapes and dtypes first, then the bytes
// through broadcast_parameters. Other ranks' input is ignored (a checkpoint read on rank 0).
[[nodiscard]] std::map<std::string, at::Tensor> broadcast_tensors(dist::Comm& comm,
                                                                  const std::map<std::string, at::Tensor>& tensors,
                                                                  int root = 0);

// Throws hpctrain::Error on every rank when the ranks' (name, shape, dtype) lists differ, naming the
// first entry that differs, the ranks, and both versions. Costs one 8-byte allgather when they agree.
void check_same_structure(dist::Comm& comm, const std::vector<std::string>& names,
                          const std::vector<std::vector<int64_t>>& shapes, const std::vector<at::ScalarType>& dtypes);
void check_same_structure(dist::Comm& comm, const NamedTensors& named_tensors);

// The name of the first tensor whose bytes differ between ranks (a 64-bit checksum per tensor is
// compared), or "" when all agree. The same answer on every rank.
[[nodiscard]] std::string find_unsynchronized(dist::Comm& comm, const NamedTensors& named_tensors);

}  // namespace hpctrain::ddp
