// The MPI communicator: the only translation unit that includes mpi.h.
// Only the C API is used: without these, OpenMPI's mpi.h pulls in the deprecated C++ bindings, whose
// vtables need libmpi_cxx at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>  // Open MPI's extensions: MPIX_CUDA_AWARE_SUPPORT, MPIX_Query_cuda_support
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "hpctrain/core/error.hpp"
#include "hpctrain/core/stop_request.hpp"
#include "hpctrain/dist/comm.hpp"
#include "hpctrain/dist/mpi_info.hpp"
#include "stall_report.hpp"

// Checks an MPI return code; the message records the expression, file, line and rank.
#define HPCTRAIN_MPI_CHECK(expr)                                                                    \
  do {                                                                                              \
    int hpctrain_mpi_rc = (expr);                                                                   \
    if (hpctrain_mpi_rc != MPI_SUCCESS) ::hpctrain::dist::throw_mpi_error(#expr, __FILE__, __LINE__, hpctrain_mpi_rc); \
  } while (0)

namespace hpctrain::dist {

[[noreturn]] void throw_mpi_error(const char* expr, const char* file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  fail("MPI call failed on rank {}: {} ({}:{}): {}", rank, expr, file, line, std::string(text, length));
}

namespace {

// Note [Device buffers]: a library built without CUDA support (Debian's Open MPI) says so at compile time;
// one built with it is asked at run time, since the same build may run without a GPU.
bool cuda_aware() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  static const bool answer = MPIX_Query_cuda_support() == 1;
  return answer;
#else
  return false;
#endif
}

// Note [bf16 reduction]: the user operation MPI calls with `count` elements of bf16_handles().type.
void bf16_sum_op(void* in, void* inout, int* count, MPI_Datatype*) {
  bf16_sum(static_cast<const uint16_t*>(in), static_cast<uint16_t*>(inout), static_cast<std::size_t>(*count));
}

// Made on first use (after MPI_Init, by whichever thread reduces first); MPI_Finalize frees them.
struct Bf16Handles {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op sum = MPI_OP_NULL;
  Bf16Handles() {
    HPCTRAIN_MPI_CHECK(MPI_Type_contiguous(2, MPI_BYTE, &type));
    HPCTRAIN_MPI_CHECK(MPI_Type_commit(&type));
    HPCTRAIN_MPI_CHECK(MPI_Op_create(&bf16_sum_op, /*commute=*/1, &sum));
  }
};
const Bf16Handles& bf16_handles() {
  static const Bf16Handles handles;
  return handles;
}

MPI_Datatype to_mpi(DType dtype) {
  switch (dtype) {
    case DType::bf16: return bf16_handles().type;
    case DType::u8: return MPI_UINT8_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

// bf16 has only its user operation (Note [bf16 reduction]).
MPI_Op to_mpi(ReduceOp op, DType dtype) {
  if (dtype == DType::bf16) {
    HPCTRAIN_CHECK(op == ReduceOp::sum, "allreduce of bf16: only ReduceOp::sum is supported (got max or min)");
    return bf16_handles().sum;
  }
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}


ThreadLevel to_thread_level(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE) return ThreadLevel::multiple;
  if (provided >= MPI_THREAD_SERIALIZED) return ThreadLevel::serialized;
  if (provided >= MPI_THREAD_FUNNELED) return ThreadLevel::funneled;
  return ThreadLevel::single;
}

// Note [Collective timeout]
// A collective that never completes (a rank stuck in I/O, ranks running different code) would hang the
// job until the scheduler kills it. Each MpiComm (the world and every duplicate, e.g. the gradient
// reducer's) owns a Slot where the calling thread records, with relaxed atomic stores, which collective it
// is in, its number on that communicator and when it entered; that is the whole cost on the training
// path. A CollectiveWatchdog thread per process (MpiRuntime) wakes every 200 ms: it answers other ranks'
// requests for these slots, and when one of its own collectives has waited longer than the timeout
// (Comm::set_collective_timeout, process-wide; --collective-timeout, default 300 s) it asks every other
// rank's watchdog for its slots over a private duplicate of MPI_COMM_WORLD (point-to-point, its own tags,
// MPI_Iprobe polling), and the lowest waiting rank prints one message naming the waiting ranks, the ones
// that did not arrive and the node of each one that does not answer (its node or the network to it may be
// down; the node names are gathered once at start-up; stall_report.hpp), runs the registered cleanups
// (Note [Cleanup before an abort]) and calls MPI_Abort. The other waiting ranks report only if
// the job is still alive 15 s later (the lowest one may itself be the broken one). When the network between
// nodes fails, each side sees only itself waiting and reports at once, naming the ranks it lost: every rank
// ends within the timeout plus the 5 s reply wait (tests/multihost/test_link_down_*.sh). Without
// MPI_THREAD_MULTIPLE the watchdog may not communicate: it reports this rank's collective alone and
// aborts. Communicators are numbered in creation order, the same on every rank (creation is collective).
constexpr std::size_t kMaxTracked = 16;  // communicators tracked at once; more are not watched

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Slot {
  std::atomic<bool> used{false};
  std::atomic<bool> inside{false};
  std::atomic<int64_t> comm_id{0}, kind{0}, entered{0}, completed{0}, changed_ms{0};
  std::atomic<const char*> label{nullptr};  // Comm::set_label, interned (never freed)
};

// Comm::set_label's texts, kept for the process's lifetime so that the watchdog may read a slot's label any time.
const char* intern_label(const std::string& label) {
  static std::mutex mutex;
  static std::set<std::string> labels;
  std::lock_guard<std::mutex> lock(mutex);
  return labels.insert(label).first->c_str();
}
Slot g_slots[kMaxTracked];
std::atomic<int64_t> g_next_comm_id{0};
std::atomic<int64_t> g_timeout_ms{static_cast<int64_t>(kDefaultCollectiveTimeoutSeconds * 1000)};

Slot* claim_slot() {
  const int64_t id = g_next_comm_id.fetch_add(1);
  for (Slot& slot : g_slots) {
    if (slot.used.exchange(true)) continue;
    slot.comm_id = id, slot.inside = false, slot.kind = 0, slot.entered = 0, slot.completed = 0, slot.label = nullptr;
    slot.changed_ms = steady_ms();
    return &slot;
  }
  return nullptr;
}

// This process's communicators as the stall report describes them.
std::vector<stall::CommState> local_states() {
  std::vector<stall::CommState> states;
  const int64_t now = steady_ms();
  for (const Slot& slot : g_slots) {
    if (!slot.used.load()) continue;
    stall::CommState state;
    state.inside = slot.inside.load(std::memory_order_acquire);
    state.comm_id = slot.comm_id.load(), state.kind = static_cast<stall::Kind>(slot.kind.load());
    state.entered = slot.entered.load(), state.completed = slot.completed.load();
    state.seconds = static_cast<double>(now - slot.changed_ms.load()) / 1000;
    if (const char* label = slot.label.load()) state.label = label;
    states.push_back(state);
  }
  return states;
}

// Marks a collective on a slot for its lifetime (the training path's only cost of the watchdog).
class Tracked {
 public:
  Tracked(Slot* slot, stall::Kind kind) : slot_(slot) {
    if (slot_ == nullptr) return;
    slot_->kind.store(static_cast<int64_t>(kind), std::memory_order_relaxed);
    slot_->entered.store(slot_->entered.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    slot_->changed_ms.store(steady_ms(), std::memory_order_relaxed);
    slot_->inside.store(true, std::memory_order_release);
  }
  ~Tracked() {
    if (slot_ == nullptr) return;
    slot_->completed.store(slot_->entered.load(std::memory_order_relaxed), std::memory_order_relaxed);
    slot_->changed_ms.store(steady_ms(), std::memory_order_relaxed);
    slot_->inside.store(false, std::memory_order_release);
  }
  Tracked(const Tracked&) = delete;
  Tracked& operator=(const Tracked&) = delete;

 private:
  Slot* slot_;
};

// MPI counts are int: anything larger is sent in chunks of at most INT_MAX elements.
constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX);

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed in the destructor) when `owns_comm`; MPI_COMM_WORLD is never owned.
  MpiComm(MPI_Comm comm, ThreadLevel thread_level, bool owns_comm)
      : comm_(comm), thread_level_(thread_level), owns_comm_(owns_comm), slot_(claim_slot()) {
    HPCTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &world_size_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &local_rank_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &local_size_));
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (slot_ != nullptr) slot_->used = false;
    if (finalized) return;
    MPI_Comm_free(&node_comm_);
    if (owns_comm_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void barrier() override {
    Tracked tracked(slot_, stall::Kind::barrier);
    HPCTRAIN_MPI_CHECK(MPI_Barrier(comm_));
  }

  void idle_barrier() override {
    Tracked tracked(slot_, stall::Kind::barrier);
    MPI_Request request = MPI_REQUEST_NULL;
    HPCTRAIN_MPI_CHECK(MPI_Ibarrier(comm_, &request));
    for (int done = 0;;) {
      HPCTRAIN_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) override {
    Tracked tracked(slot_, stall::Kind::allreduce);
    count_bytes(count * size_of(dtype));
    auto* bytes = static_cast<uint8_t*>(data);
    for (const Chunk& chunk : split_into_chunks(count, kMaxCount)) {
      HPCTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + chunk.offset * size_of(dtype),
                                       static_cast<int>(chunk.count), to_mpi(dtype), to_mpi(op, dtype), comm_));
    }
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    Tracked tracked(slot_, stall::Kind::broadcast);
    count_bytes(bytes);
    auto* p = static_cast<uint8_t*>(data);
    for (const Chunk& chunk : split_into_chunks(bytes, kMaxCount)) {
      HPCTRAIN_MPI_CHECK(MPI_Bcast(p + chunk.offset, static_cast<int>(chunk.count), MPI_BYTE, root, comm_));
    }
  }

  void allgather(const void* data, std::size_t bytes, void* out) override {
    HPCTRAIN_CHECK(bytes <= kMaxCount, "allgather of {} bytes per rank exceeds INT_MAX", bytes);
    Tracked tracked(slot_, stall::Kind::allgather);
    count_bytes(bytes);
    HPCTRAIN_MPI_CHECK(MPI_Allgather(data, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, comm_));
  }

  void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op) override {
    HPCTRAIN_CHECK(count <= kMaxCount, "reduce-scatter of {} elements per rank exceeds INT_MAX", count);
    Tracked tracked(slot_, stall::Kind::allreduce);
    count_bytes(count * size_of(dtype) * static_cast<std::size_t>(world_size_) / 2);  // see Comm::bytes_sent
    HPCTRAIN_MPI_CHECK(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), to_mpi(dtype), to_mpi(op, dtype), comm_));
  }

  void allgather_in_place(void* data, std::size_t bytes) override {
    HPCTRAIN_CHECK(bytes <= kMaxCount, "allgather of {} bytes per rank exceeds INT_MAX", bytes);
    Tracked tracked(slot_, stall::Kind::allgather);
    count_bytes(bytes);
    HPCTRAIN_MPI_CHECK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, static_cast<int>(bytes), MPI_BYTE, comm_));
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);
  }

  ThreadLevel thread_level() const override { return thread_level_; }
  bool accepts(MemoryKind kind) const override { return kind == MemoryKind::host || cuda_aware(); }

  void set_collective_timeout(double seconds) override {
    HPCTRAIN_CHECK(seconds >= 0 && seconds <= 1e9, "collective timeout {} s: expected 0 (off) <= seconds <= 1e9", seconds);
    g_timeout_ms = static_cast<int64_t>(seconds * 1000);
  }

  void set_label(const std::string& label) override {
    if (slot_ != nullptr) slot_->label.store(label.empty() ? nullptr : intern_label(label));
  }

  std::unique_ptr<Comm> duplicate() override {
    MPI_Comm copy = MPI_COMM_NULL;
    HPCTRAIN_MPI_CHECK(MPI_Comm_dup(comm_, &copy));  // inherits the MPI_ERRORS_RETURN handler
    auto duplicate = std::make_unique<MpiComm>(copy, thread_level_, /*owns_comm=*/true);
    share_byte_count(*duplicate);
    return duplicate;
  }

 private:
  MPI_Comm comm_;
  ThreadLevel thread_level_;
  bool owns_comm_;
  Slot* slot_;  // Note [Collective timeout]; null when kMaxTracked communicators are tracked already
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace

// The stall inspector's thread (Note [Collective timeout]).
class CollectiveWatchdog {
 public:
  explicit CollectiveWatchdog(bool thread_multiple) : thread_multiple_(thread_multiple) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    if (thread_multiple_) HPCTRAIN_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
    gather_hosts();
    thread_ = std::thread([this] { loop(); });
  }
  ~CollectiveWatchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

 private:
  static constexpr int kTagRequest = 7101, kTagReply = 7102;
  static constexpr int64_t kPollMs = 200, kReplyWaitMs = 5000, kOthersReportAfterMs = 15000;
  static constexpr int64_t kStopProbeMs = 3000;  // Note [Stop while waiting]

  // Every rank's node name, for a report that names a rank that does not answer (its node may be down).
  void gather_hosts() {
    char name[MPI_MAX_PROCESSOR_NAME] = {};
    int length = 0;
    MPI_Get_processor_name(name, &length);
    std::vector<char> all(static_cast<std::size_t>(size_) * MPI_MAX_PROCESSOR_NAME, '\0');
    HPCTRAIN_MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                                     MPI_COMM_WORLD));
    for (int r = 0; r < size_; ++r) {
      const char* host = all.data() + static_cast<std::ptrdiff_t>(r) * MPI_MAX_PROCESSOR_NAME;
      hosts_.emplace_back(host, strnlen(host, MPI_MAX_PROCESSOR_NAME));
    }
  }

  // A fresh table of every rank's state: this rank's own, the others unanswered (with their node's name).
  std::vector<stall::RankState> empty_states() const {
    std::vector<stall::RankState> ranks(static_cast<std::size_t>(size_));
    for (std::size_t r = 0; r < ranks.size(); ++r) ranks[r].host = hosts_[r];
    ranks[static_cast<std::size_t>(rank_)].answered = true;
    ranks[static_cast<std::size_t>(rank_)].comms = local_states();
    return ranks;
  }

  // Ends the job from this thread, after the registered cleanups (Note [Cleanup before an abort]).
  [[noreturn]] static void end_job(int exit_code) {
    run_abort_cleanups();
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::milliseconds(kPollMs), [this] { return stop_; })) {
      try {
        if (thread_multiple_) answer_requests();
        check_own_collectives();
        check_stop_while_waiting();
      } catch (...) {  // a diagnostic thread never ends the process by an exception
      }
    }
  }

  void check_own_collectives() {
    const int64_t timeout_ms = g_timeout_ms.load();
    if (timeout_ms <= 0 || steady_ms() < next_check_ms_) return;
    for (const stall::CommState& state : local_states()) {
      if (!state.inside || state.seconds * 1000 < static_cast<double>(timeout_ms)) continue;
      on_stall(state, static_cast<double>(timeout_ms) / 1000);
      return;
    }
  }

  // Note [Stop while waiting]
  // A stop request (core::stop_signal: SIGTERM/SIGINT/SIGUSR1, Note [Stop agreement]) lets the current step
  // finish, which needs every rank. When a rank has died, the launcher signals the survivors, and they wait
  // in a collective the dead rank never joins: until the collective timeout (300 s), if the launcher's
  // SIGKILL does not come first. So once a stop was requested and a collective has waited kStopProbeMs,
  // this watchdog asks the other ranks' watchdogs for their state: all answer (alive; e.g. rank 0 is
  // writing the checkpoint) -> keep waiting and ask again later; some do not -> end the job now, naming
  // them, with 128 + signo (the code of a process the signal ended). Needs MPI_THREAD_MULTIPLE.
  void check_stop_while_waiting() {
    const int signo = core::stop_signal();
    if (signo == 0 || !thread_multiple_ || steady_ms() < next_stop_probe_ms_) return;
    for (const stall::CommState& state : local_states()) {
      if (!state.inside || state.seconds * 1000 < static_cast<double>(kStopProbeMs)) continue;
      std::vector<stall::RankState> ranks = empty_states();
      gather_states(ranks);
      std::string silent;
      for (int r = 0; r < size_; ++r)
        if (!ranks[static_cast<std::size_t>(r)].answered) silent += (silent.empty() ? "" : ", ") + std::to_string(r);
      if (silent.empty()) {
        next_stop_probe_ms_ = steady_ms() + kReplyWaitMs;
        return;
      }
      std::fprintf(stderr, "[rank %d] error: %s arrived while %s #%lld waits for rank(s) %s, which do not answer: "
                   "ending the job without a checkpoint\n", rank_, core::signal_name(signo).c_str(),
                   stall::to_string(state.kind), static_cast<long long>(state.entered), silent.c_str());
      std::fflush(stderr);
      end_job(128 + signo);
    }
  }

  void on_stall(const stall::CommState& mine, double timeout_seconds) {
    std::vector<stall::RankState> ranks = empty_states();
    if (thread_multiple_) gather_states(ranks);
    const std::vector<int> waiting = stall::waiting_ranks(mine, ranks);
    const bool reporter = waiting.empty() || waiting.front() == rank_;
    if (!reporter && mine.seconds < timeout_seconds + kOthersReportAfterMs / 1000.0) {
      next_check_ms_ = steady_ms() + kReplyWaitMs;  // the lowest waiting rank reports; ask again later
      return;
    }
    std::string text = stall::message(mine, timeout_seconds, ranks);
    if (!thread_multiple_) text += "\n  (MPI did not provide MPI_THREAD_MULTIPLE: the other ranks' state is unknown)";
    std::fprintf(stderr, "[rank %d] error: %s\n", rank_, text.c_str());
    std::fflush(stderr);
    end_job(1);
  }

  // Asks every other rank's watchdog for its slots; ranks that do not reply in time stay unanswered.
  void gather_states(std::vector<stall::RankState>& ranks) {
    static const int32_t kAsk = 1;  // static: the sends may outlive this call
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Isend(&kAsk, 1, MPI_INT32_T, r, kTagRequest, comm_, &request) == MPI_SUCCESS) MPI_Request_free(&request);
    }
    int pending = size_ - 1;
    for (const int64_t deadline = steady_ms() + kReplyWaitMs; pending > 0 && steady_ms() < deadline;) {
      answer_requests();
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagReply, comm_, &flag, &status) != MPI_SUCCESS || flag == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      int count = 0;
      MPI_Get_count(&status, MPI_INT64_T, &count);
      std::vector<int64_t> words(static_cast<std::size_t>(std::max(count, 0)));
      MPI_Recv(words.data(), count, MPI_INT64_T, status.MPI_SOURCE, kTagReply, comm_, MPI_STATUS_IGNORE);
      auto& rank = ranks[static_cast<std::size_t>(status.MPI_SOURCE)];
      if (!rank.answered) --pending;
      rank.answered = true, rank.comms = stall::decode(words);
    }
  }

  void answer_requests() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kTagRequest, comm_, &flag, &status) != MPI_SUCCESS || flag == 0) return;
      int32_t ask = 0;
      MPI_Recv(&ask, 1, MPI_INT32_T, status.MPI_SOURCE, kTagRequest, comm_, MPI_STATUS_IGNORE);
      const std::vector<int64_t> words = stall::encode(local_states());
      MPI_Send(words.data(), static_cast<int>(words.size()), MPI_INT64_T, status.MPI_SOURCE, kTagReply, comm_);
    }
  }

  bool thread_multiple_;
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<std::string> hosts_;  // by rank
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  int64_t next_check_ms_ = 0;       // watchdog thread only
  int64_t next_stop_probe_ms_ = 0;  // watchdog thread only
  std::thread thread_;
};

// Note [Idle MPI threads yield]
// With --overlap, a communication thread sits in MPI_Allreduce while the training threads compute.
// Open MPI polls for progress in a busy loop by default, so on a node whose cores all run training
// threads (the usual CPU setup: threads per rank = cores / ranks) that thread takes a core's share from
// the computation it is meant to hide behind. Measured on 2 cores, 2 ranks x 1 thread, CNN benchmark
// (bench/ddp/run.sh): 32.3 ms per step polling, 28.3 ms yielding, 26.6 ms without any communication.
// Open MPI's mpi_yield_when_idle makes idle polling call sched_yield(); it costs microseconds of
// latency per call, nothing next to a gradient bucket. A value the user set (environment or MCA file
// via the environment) wins. Other MPI implementations ignore the variable.
namespace {
void prefer_yielding_progress() { setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0); }
}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  prefer_yielding_progress();
  int provided = 0;
  HPCTRAIN_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  // Errors come back as return codes so HPCTRAIN_MPI_CHECK can name the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  world_ = std::make_unique<MpiComm>(MPI_COMM_WORLD, to_thread_level(provided), /*owns_comm=*/false);
  if (world_->world_size() > 1) watchdog_ = std::make_unique<CollectiveWatchdog>(thread_multiple_);
}

MpiRuntime::~MpiRuntime() {
  watchdog_.reset();  // joined before MPI_Finalize (Note [Collective timeout])
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

MpiLibraryInfo mpi_library_info() {
  MpiLibraryInfo info;
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  info.library.assign(text, static_cast<std::size_t>(std::max(length, 0)));
  info.library = info.library.substr(0, info.library.find('\n'));
  MPI_Get_version(&info.standard_major, &info.standard_minor);
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  info.cuda_aware_compiled = true;
#endif
  info.cuda_aware_runtime = cuda_aware();
  return info;
}

}  // namespace hpctrain::dist
