// CPU threads per rank: LibTorch defaults to one intra-op thread here, so every command sets it.
#pragma once

namespace hpctrain::train {

// Threads per rank when the user gives none: cores on the node ÷ ranks on the node (at least 1).
int default_threads_per_rank(int local_size);

// Sets LibTorch's intra-op thread count (and OpenMP's, which OpenBLAS uses).
void set_threads(int threads);

// Sets `requested` threads (--threads; default_threads_per_rank when 0) and returns the count. When it is
// more than twice the cores each of `local_size` ranks can use, rank 0 warns, naming --threads, the count,
// the usable cores and the ranks on the node (Note [Too many threads] in cpu_info.cpp).
int apply_threads(int requested, int local_size);

}  // namespace hpctrain::train
