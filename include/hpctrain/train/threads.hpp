// CPU threads per rank: LibTorch defaults to one intra-op thread here, so every command sets it.
#pragma once

namespace hpctrain::train {

// Threads per rank when the user gives none: cores on the node ÷ ranks on the node (at least 1).
int default_threads_per_rank(int local_size);

// Sets LibTorch's intra-op thread count (and OpenMP's, which OpenBLAS uses).
void set_threads(int threads);

}  // namespace hpctrain::train
