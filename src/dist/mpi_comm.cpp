// The MPI communicator: the only translation unit that includes mpi.h.
// Only the C API is used: without these, OpenMPI's mpi.h pulls in the deprecated C++ bindings, whose
// vtables need libmpi_cxx at link time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdlib>

#include "hpctrain/core/error.hpp"
#include "hpctrain/dist/comm.hpp"

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

MPI_Datatype to_mpi(DType dtype) {
  switch (dtype) {
    case DType::u8: return MPI_UINT8_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op to_mpi(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  return MPI_SUM;
}

std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::u8: return 1;
    case DType::i32: case DType::f32: return 4;
    case DType::i64: case DType::f64: return 8;
  }
  return 1;
}

ThreadLevel to_thread_level(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE) return ThreadLevel::multiple;
  if (provided >= MPI_THREAD_SERIALIZED) return ThreadLevel::serialized;
  if (provided >= MPI_THREAD_FUNNELED) return ThreadLevel::funneled;
  return ThreadLevel::single;
}

// MPI counts are int: anything larger is sent in chunks of at most INT_MAX elements.
constexpr std::size_t kMaxCount = static_cast<std::size_t>(INT_MAX);

class MpiComm final : public Comm {
 public:
  // Takes ownership of `comm` (freed in the destructor) when `owns_comm`; MPI_COMM_WORLD is never owned.
  MpiComm(MPI_Comm comm, ThreadLevel thread_level, bool owns_comm)
      : comm_(comm), thread_level_(thread_level), owns_comm_(owns_comm) {
    HPCTRAIN_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_size(comm_, &world_size_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_comm_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_rank(node_comm_, &local_rank_));
    HPCTRAIN_MPI_CHECK(MPI_Comm_size(node_comm_, &local_size_));
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    MPI_Comm_free(&node_comm_);
    if (owns_comm_) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }

  void barrier() override { HPCTRAIN_MPI_CHECK(MPI_Barrier(comm_)); }

  void allreduce(void* data, std::size_t count, DType dtype, ReduceOp op) override {
    auto* bytes = static_cast<uint8_t*>(data);
    for (const Chunk& chunk : split_into_chunks(count, kMaxCount)) {
      HPCTRAIN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, bytes + chunk.offset * size_of(dtype),
                                       static_cast<int>(chunk.count), to_mpi(dtype), to_mpi(op), comm_));
    }
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    auto* p = static_cast<uint8_t*>(data);
    for (const Chunk& chunk : split_into_chunks(bytes, kMaxCount)) {
      HPCTRAIN_MPI_CHECK(MPI_Bcast(p + chunk.offset, static_cast<int>(chunk.count), MPI_BYTE, root, comm_));
    }
  }

  void allgather(const void* data, std::size_t bytes, void* out) override {
    HPCTRAIN_CHECK(bytes <= kMaxCount, "allgather of {} bytes per rank exceeds INT_MAX", bytes);
    HPCTRAIN_MPI_CHECK(MPI_Allgather(data, static_cast<int>(bytes), MPI_BYTE, out, static_cast<int>(bytes), MPI_BYTE, comm_));
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(comm_, exit_code);
    std::_Exit(exit_code);
  }

  ThreadLevel thread_level() const override { return thread_level_; }

  std::unique_ptr<Comm> duplicate() override {
    MPI_Comm copy = MPI_COMM_NULL;
    HPCTRAIN_MPI_CHECK(MPI_Comm_dup(comm_, &copy));  // inherits the MPI_ERRORS_RETURN handler
    return std::make_unique<MpiComm>(copy, thread_level_, /*owns_comm=*/true);
  }

 private:
  MPI_Comm comm_;
  ThreadLevel thread_level_;
  bool owns_comm_;
  MPI_Comm node_comm_ = MPI_COMM_NULL;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace

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
}

MpiRuntime::~MpiRuntime() {
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace hpctrain::dist
