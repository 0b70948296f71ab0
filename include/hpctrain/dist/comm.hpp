// Communicator interface: rank/world/local rank and the collectives hpctrain needs.
// Two implementations: MPI (src/dist/mpi_comm.cpp, the only file that includes mpi.h) and a
// single-process one, so library code and unit tests run without mpirun.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace hpctrain::dist {

class CollectiveWatchdog;  // src/dist/mpi_comm.cpp

// bf16: bfloat16 bits in uint16_t, reduced with ReduceOp::sum only (bf16_sum; Note [bf16 reduction]).
enum class DType { u8, i32, i64, f32, f64, bf16 };
enum class ReduceOp { sum, max, min };
// Bytes of one element of `dtype`.
std::size_t size_of(DType dtype);

// Note [bf16 reduction]
// MPI has no standard bfloat16 type, so the MPI communicator reduces DType::bf16 with a user operation
// (MPI_Op_create, commutative) over a 2-byte contiguous datatype, and that operation is bf16_sum: each pair
// is widened to float32 (exact), added in float32 and rounded back to bf16 (nearest, ties to even), with
// every NaN written as the canonical 0x7FC0. The operation is commutative bit for bit (a float32 addition
// is; NaN payloads, the one exception, are canonicalized), so every reduction schedule Open MPI's
// allreduce uses (recursive doubling, ring, Rabenseifner: each partial sum is either computed by one rank
// and sent, or computed by both partners from the same two operands) leaves identical bits on every rank;
// tests/mpi_ddp/bf16_cases.cpp checks it on 2 ranks (more ranks were not run). Inf stays inf (and
// inf + -inf is NaN), so an overflow flag read from the reduced values still sees it. An NCCL communicator
// would map DType::bf16 to ncclBfloat16.
// inout[i] = bf16(float(in[i]) + float(inout[i])) for i < count.
void bf16_sum(const uint16_t* in, uint16_t* inout, std::size_t count);

// What MPI allows threads to do (the `provided` level of MPI_Init_thread), weakest first.
enum class ThreadLevel { single, funneled, serialized, multiple };

// A [offset, offset + count) range of elements; see split_into_chunks.
struct Chunk {
  std::size_t offset = 0;
  std::size_t count = 0;
};
// Splits `total` elements into consecutive chunks of at most `max_chunk` elements (MPI counts are int,
// so larger transfers go out as several calls). Empty for total == 0; max_chunk must be positive.
std::vector<Chunk> split_into_chunks(std::size_t total, std::size_t max_chunk);

// Seconds a collective may wait before the job is ended with a report of every rank's state
// (Note [Collective timeout] in src/dist/mpi_comm.cpp); 0 turns the watchdog off.
inline constexpr double kDefaultCollectiveTimeoutSeconds = 300;

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }

// Where a collective's buffer lives (Comm::accepts).
enum class MemoryKind { host, cuda };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // Rank among the processes on this node (MPI_COMM_TYPE_SHARED), so mpirun and srun agree.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;

  virtual void barrier() = 0;
  // A barrier for a rank that may wait seconds for the others (one rank writing a file): it waits without
  // taking a core (MPI_Ibarrier tested every millisecond), so the working ranks' threads get the node's
  // cores. Open MPI's waiting otherwise spins, yielding or not (Note [Idle MPI threads yield]).
  virtual void idle_barrier() { barrier(); }
  // In-place reduction of `count` elements (counts above INT_MAX are sent in chunks).
  virtual void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) = 0;
  // Broadcasts `bytes` bytes from `root` into every rank's `data`.
  virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
  // Every rank contributes `bytes` bytes; `out` receives world_size * bytes, rank-ordered.
  virtual void allgather(const void* data, std::size_t bytes, void* out) = 0;
  // ZeRO's collectives (Note [ZeRO slices] in src/dist/zero_slices.cpp). Reduce-scatter: `send` holds
  // world_size * count elements; rank r receives in `recv` the reduction of every rank's elements
  // [r count, (r + 1) count) (MPI_Reduce_scatter_block; bf16 sums with the user operation of
  // Note [bf16 reduction], so every rank's block has the bits an allreduce would give it).
  virtual void reduce_scatter(const void* send, void* recv, std::size_t count, DType dtype, ReduceOp op);
  // All-gather in place: `data` holds world_size blocks of `bytes` bytes; every rank's own block (rank r's
  // at r * bytes) reaches every rank (MPI_Allgather with MPI_IN_PLACE).
  virtual void allgather_in_place(void* data, std::size_t bytes);
  // Ends every process of the job (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // Process-wide: a collective on any communicator of this process that waits longer than `seconds`
  // ends the job with a message naming the waiting ranks and the missing ones (0: never; default
  // kDefaultCollectiveTimeoutSeconds). Not collective. Communicators without MPI never wait.
  virtual void set_collective_timeout(double seconds) { (void)seconds; }
  // What this communicator's collectives are doing now ("parameter all-gather of unit 'transformer layer 3'"),
  // named by the collective timeout's report of a collective that does not complete; empty: nothing. Not
  // collective; cheap after the first use of a text (texts are kept for the process's lifetime).
  virtual void set_label(const std::string& label) { (void)label; }

  // Note [Device buffers]: whether the collectives take buffers of this kind directly. Host memory always;
  // CUDA memory when the MPI library is CUDA-aware (MPIX_Query_cuda_support) — otherwise, and for host-only
  // communicators, callers stage device buffers through pinned host memory (ddp::GradientReducer). An NCCL
  // communicator would answer true for cuda and false for host without changing the callers.
  virtual bool accepts(MemoryKind kind) const { return kind == MemoryKind::host; }
  // The thread level MPI provided; communicators without MPI put no limits on threads.
  virtual ThreadLevel thread_level() const { return ThreadLevel::multiple; }
  // Collective: a communicator over the same ranks whose collectives never match this one's (MPI_Comm_dup),
  // for a thread that communicates while another uses this communicator (see Note [Bucket order]).
  virtual std::unique_ptr<Comm> duplicate();

  bool is_main_process() const { return rank() == 0; }

  template <typename T>
  void allreduce(T* data, std::size_t count, ReduceOp op = ReduceOp::sum) { allreduce(data, count, dtype_of<T>(), op); }
  template <typename T>
  T allreduce_value(T value, ReduceOp op = ReduceOp::sum) {
    allreduce(&value, 1, dtype_of<T>(), op);
    return value;
  }
  // Broadcasts a string of any length from root (length first, then bytes).
  void broadcast_string(std::string& text, int root);
  // Gathers one value from every rank, rank-ordered.
  template <typename T>
  std::vector<T> allgather_value(const T& value) {
    std::vector<T> out(static_cast<std::size_t>(world_size()));
    allgather(&value, sizeof(T), out.data());
    return out;
  }
  // Collective agreement on failure: true on every rank if any rank passes true.
  bool any(bool flag) { return allreduce_value<int32_t>(flag ? 1 : 0, ReduceOp::max) != 0; }

  // Bytes this rank has passed to collectives since the communicator was made, summed over it and every
  // duplicate() of it (the gradient reducer's too): allreduce count x element size, broadcast and
  // allgather bytes (this rank's contribution). The payload, not the wire bytes (a ring allreduce sends
  // about 2 (W - 1) / W times it). A reduce-scatter of N input bytes counts N / 2: a ring allreduce is a
  // reduce-scatter followed by an all-gather, so a reduce-scatter puts half an allreduce's bytes on the
  // wire, and at 2 ranks the ZeRO pair (reduce-scatter of N, all-gather of N / 2 contributed) counts N,
  // exactly an allreduce of N (Note [ZeRO slices]). Thread-safe. Communicators without MPI count nothing.
  [[nodiscard]] int64_t bytes_sent() const { return traffic_->load(std::memory_order_relaxed); }

 protected:
  void count_bytes(std::size_t bytes) { traffic_->fetch_add(static_cast<int64_t>(bytes), std::memory_order_relaxed); }
  // For duplicate(): the copy adds to this communicator's count.
  void share_byte_count(Comm& copy) const { copy.traffic_ = traffic_; }

 private:
  std::shared_ptr<std::atomic<int64_t>> traffic_ = std::make_shared<std::atomic<int64_t>>(0);
};

// Note [Cleanup before an abort]
// When a process ends the job itself (the collective watchdog's MPI_Abort after --collective-timeout, e.g.
// the network to another node went down; Note [Collective timeout]), no destructor runs, so a command's
// temporaries would stay behind. An AbortCleanup registers a cleanup for its lifetime; the watchdog runs
// every registered one right before MPI_Abort, on its own thread while the main thread waits in the stuck
// collective. A cleanup must be quick, use no MPI, throw nothing it needs caught (exceptions are ignored)
// and remove only this process's own files (another node's rank may still be using its own).
class AbortCleanup {
 public:
  explicit AbortCleanup(std::function<void()> cleanup);
  ~AbortCleanup();
  AbortCleanup(const AbortCleanup&) = delete;
  AbortCleanup& operator=(const AbortCleanup&) = delete;

 private:
  uint64_t id_;
};
// Runs every registered cleanup once (Note [Cleanup before an abort]); for the code that calls MPI_Abort.
void run_abort_cleanups() noexcept;

// A communicator for one process: collectives are identities.
std::unique_ptr<Comm> make_single_process_comm();

// Owns MPI's lifetime: MPI_Init_thread in the constructor (asks for MPI_THREAD_MULTIPLE so a
// communication thread may overlap backward), MPI_Finalize in the destructor. When the program was
// not started by mpirun/srun, MPI still initializes as a singleton (world_size 1). With more than one
// rank it also runs the collective watchdog (Comm::set_collective_timeout).
class MpiRuntime {
 public:
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  Comm& world() { return *world_; }
  bool thread_multiple() const { return thread_multiple_; }

 private:
  std::unique_ptr<Comm> world_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // world_size > 1 only; stopped before MPI_Finalize
  bool thread_multiple_ = false;
};

}  // namespace hpctrain::dist
