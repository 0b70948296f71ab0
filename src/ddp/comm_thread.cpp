#include "comm_thread.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>

#include "hpctrain/core/span.hpp"

namespace hpctrain::ddp {

struct CommThread::State {
  std::mutex mutex;
  std::condition_variable work_ready;
  std::condition_variable job_done;
  std::deque<Job> queue;
  uint64_t submitted = 0;
  uint64_t completed = 0;
  bool busy = false;  // a job is running (possibly blocked in a collective)
  bool stop = false;
  std::exception_ptr error;
};

void CommThread::run_jobs(const std::shared_ptr<State>& shared, const Job& on_start) {
  auto& state = *shared;
  span::name_this_thread("communication");
  std::exception_ptr start_error;
  try {
    if (on_start) on_start();
  } catch (...) {
    start_error = std::current_exception();  // every job is skipped, wait() rethrows it
  }
  std::unique_lock<std::mutex> lock(state.mutex);
  if (start_error) state.error = start_error;
  while (true) {
    state.work_ready.wait(lock, [&] { return state.stop || !state.queue.empty(); });
    if (state.stop) return;
    Job job = std::move(state.queue.front());
    state.queue.pop_front();
    const bool skip = static_cast<bool>(state.error);
    state.busy = true;
    lock.unlock();
    std::exception_ptr error;
    if (!skip) {
      try {
        job();
      } catch (...) {
        error = std::current_exception();
      }
    }
    job = nullptr;  // release what the job holds before reporting it done
    lock.lock();
    if (error && !state.error) state.error = error;
    state.busy = false;
    ++state.completed;
    state.job_done.notify_all();
  }
}

CommThread::CommThread(Job on_start) : state_(std::make_shared<State>()) {
  thread_ = std::thread(run_jobs, state_, std::move(on_start));
}

CommThread::~CommThread() {
  bool busy = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stop = true;
    busy = state_->busy;
  }
  state_->work_ready.notify_all();
  if (busy) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

uint64_t CommThread::submit(Job job) {
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->queue.push_back(std::move(job));
    ticket = ++state_->submitted;
  }
  state_->work_ready.notify_one();
  return ticket;
}

void CommThread::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->job_done.wait(lock, [&] { return state_->completed >= ticket; });
  if (state_->error) std::rethrow_exception(state_->error);
}

}  // namespace hpctrain::ddp
