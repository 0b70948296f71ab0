// One background thread that runs communication jobs strictly in submission order (Note [Bucket order]).
// Torch-free; the jobs decide what they communicate. A failed job's error is rethrown by wait().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

namespace hpctrain::ddp {

class CommThread {
 public:
  using Job = std::function<void()>;

  // `on_start` runs on the thread before any job (the reducer makes its device current there, Note [Current
  // device] in include/hpctrain/train/device.hpp); an error it throws is rethrown by every wait().
  explicit CommThread(Job on_start = {});
  // Joins the thread. When a job is still inside a collective (another rank failed and the job is
  // ending), the thread is detached instead so the error can reach main() and MPI_Abort: jobs must own
  // (share) everything they touch.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues a job; returns its ticket (1, 2, ... in submission order).
  uint64_t submit(Job job);
  // Blocks until every job up to `ticket` has run; rethrows the first job error. After an error the
  // remaining jobs are skipped: their collectives would no longer match the other ranks'.
  void wait(uint64_t ticket);

 private:
  struct State;  // shared with the thread, so a detached thread never outlives what it uses
  static void run_jobs(const std::shared_ptr<State>& shared, const Job& on_start);
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace hpctrain::ddp
