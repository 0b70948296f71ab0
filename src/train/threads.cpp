#include "hpctrain/train/threads.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <string>
#include <thread>

#include "hpctrain/core/cpu_info.hpp"
#include "hpctrain/core/log.hpp"

namespace hpctrain::train {

int default_threads_per_rank(int local_size) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_size));
}

void set_threads(int threads) { at::set_num_threads(std::max(1, threads)); }

int apply_threads(int requested, int local_size) {
  const int threads = requested > 0 ? requested : default_threads_per_rank(local_size);
  const std::string warning = core::thread_oversubscription(requested > 0 ? "--threads" : "--threads (the default)",
                                                            threads, core::affinity_cpus(), local_size);
  if (!warning.empty()) log::warning("{}", warning);  // rank 0's (Note [Too many threads])
  set_threads(threads);
  return threads;
}

}  // namespace hpctrain::train
