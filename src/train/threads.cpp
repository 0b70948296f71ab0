#include "hpctrain/train/threads.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

namespace hpctrain::train {

int default_threads_per_rank(int local_size) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_size));
}

void set_threads(int threads) { at::set_num_threads(std::max(1, threads)); }

}  // namespace hpctrain::train
