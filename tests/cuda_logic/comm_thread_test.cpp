// The communication thread runs its start hook (the reducer binds its device there, Note [Current device]) on
// its own thread before any job; a failing hook fails every wait().
#include <boost/test/unit_test.hpp>

#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "ddp/comm_thread.hpp"

using hpctrain::ddp::CommThread;

BOOST_AUTO_TEST_SUITE(comm_thread_start)

BOOST_AUTO_TEST_CASE(start_hook_runs_first_on_the_thread) {
  std::mutex mutex;
  std::vector<std::string> order;
  std::thread::id hook_thread, job_thread;
  CommThread thread([&] {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back("start");
    hook_thread = std::this_thread::get_id();
  });
  const uint64_t first = thread.submit([&] {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back("job");
    job_thread = std::this_thread::get_id();
  });
  thread.submit([&] {
    std::lock_guard<std::mutex> lock(mutex);
    order.push_back("job");
  });
  thread.wait(first + 1);
  BOOST_TEST((order == std::vector<std::string>{"start", "job", "job"}));
  BOOST_TEST((hook_thread == job_thread));
  BOOST_TEST((hook_thread != std::this_thread::get_id()));
}

BOOST_AUTO_TEST_CASE(failing_start_hook_skips_jobs_and_is_rethrown) {
  bool ran = false;
  CommThread thread([] { throw std::runtime_error("cannot bind device"); });
  const uint64_t ticket = thread.submit([&] { ran = true; });
  BOOST_CHECK_THROW(thread.wait(ticket), std::runtime_error);
  BOOST_TEST(!ran);
}

BOOST_AUTO_TEST_SUITE_END()
