// dist/comm.h: the transport of expert parallelism: ranks and the four collectives the EP step uses.
//
//   all_gather(send[n], recv[N*n])             recv[r*n .. r*n+n) = rank r's send
//   all_to_all_v(rows of `row_bytes` bytes)    rank r's block d (send_counts[d] rows at send_displs[d]) lands on
//                                              rank d at recv_displs[r]; recv_counts[s] must equal what s sends
//   all_reduce_sum(f64/i64 data[n])            data = the elementwise sum over ranks (same values on every rank)
//   barrier()
// Counts and displacements are in rows and live on the host (std::span) for every transport. Every rank calls the
// same collectives in the same order.
//
// Memory: `memory()` says where the data buffers (send, recv, the all-reduced span's elements) live.
//   - host:   loopback (one process, world size 1) and OpenMPI (comm_mpi.cpp, built with KIMI_EP when MPI is
//             found). Collectives are blocking: the result is in `recv` when the call returns.
//   - device: NCCL (comm_nccl.cpp, built with KIMI_EP_NCCL in a CUDA build when NCCL is found). Every buffer pointer,
//             including `data.data()` of all_reduce_sum, is a device pointer on the comm's GPU. Collectives are
//             stream-ordered: they are enqueued on `cuda_stream()` after the work already there and return without
//             a host sync; the results are ready for later work on that stream, and for the host after
//             `synchronize()` (or `barrier()`). The caller keeps the buffers alive until then.
// `synchronize()` waits until this rank's enqueued collectives have completed (a no-op on host transports).
//
// Errors: every MPI / NCCL / CUDA return code is checked and a failure throws kimi::Error naming the collective, the
// rank and the library's message. MPI: a rank that dies leaves the job to mpirun's teardown, which kills the others
// (tests/dist: the rank-exit test bounds the time). NCCL: waits (init, synchronize, barrier, destroy) are bounded by
// NcclOptions::timeout_s; past it, or on an asynchronous NCCL error, the communicator is aborted (ncclCommAbort) and
// the call throws, so a dead peer gives an error, not a hang. A rank that catches an error mid-step calls abort()
// (never returns to MPI_Finalize, which would wait for the blocked peers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kimi::dist {

// Where a transport's data buffers live (comm.h header).
enum class CommMemory { host, device };

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "loopback", "mpi", "nccl"
  virtual CommMemory memory() const = 0;
  // The cudaStream_t a device transport enqueues on; nullptr for host transports.
  virtual void* cuda_stream() const = 0;

  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  virtual void all_to_all_v(const void* send, std::span<const int64_t> send_counts,
                            std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                            std::span<const int64_t> recv_displs, size_t row_bytes) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  virtual void all_reduce_sum(std::span<int64_t> data) = 0;
  virtual void barrier() = 0;
  // Blocks until every collective this rank enqueued has completed (host transports: returns at once).
  virtual void synchronize() = 0;
  // Ends every rank's process with `code` (MPI_Abort; NCCL: ncclCommAbort, then the bootstrap comm's abort); for an
  // error on one rank, so that the others, possibly blocked in a collective, do not wait for it forever. Print the
  // error first: this does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

// Throws kimi::Error naming `fn` and the argument `arg` when `comm`'s buffers are not host memory (quantile_balance,
// dist::model's EP layer: host vectors; the NCCL bootstrap). The EP MoE step takes either (moe.h, moe_cuda.h).
void require_host_memory(const Comm& comm, const char* fn, const char* arg = "comm");

// World size 1: every collective is a copy.
std::unique_ptr<Comm> make_loopback_comm();

// Whether this build has the MPI transport (KIMI_EP=ON and MPI found at configure time).
bool mpi_available();

// MPI_COMM_WORLD, initialising MPI (MPI_THREAD_FUNNELED) if needed; the last Comm made here finalises it.
// Throws kimi::Error when the build has no MPI.
std::unique_ptr<Comm> make_mpi_comm();

// Whether this build has the NCCL transport (KIMI_CUDA=ON, KIMI_EP_NCCL=ON and NCCL found at configure time).
bool nccl_available();

struct NcclOptions {
  // The CUDA device of this rank; -1: bootstrap.rank() mod the visible device count (one node; on several nodes
  // pass the node-local rank's device).
  int device = -1;
  // The cudaStream_t the comm enqueues on (on `device`, kept alive by the caller); nullptr: the comm creates and
  // owns a non-blocking stream.
  void* stream = nullptr;
  // Bound, in seconds, on every wait (init, synchronize, barrier, destroy); past it the comm is aborted and the call
  // throws. It covers the work already on the stream too (synchronize waits for the stream).
  double timeout_s = 300.0;
  // NCCL_NVLS_ENABLE (NVLink multicast) is set to 0 when unset; a value other than 0 in the environment is an error
  // unless this is true (multicast can take a shared host's GPUs out of service: docs/ep.md, "NCCL").
  bool allow_nvls = false;
};

// The NCCL transport over the ranks of `bootstrap` (a host transport: MPI, or the loopback for world size 1 without
// MPI): rank 0's ncclUniqueId reaches every rank through bootstrap.all_gather, then ncclCommInitRank with the same
// rank and size. Collective over bootstrap's ranks. Buffers are device memory, collectives stream-ordered (header).
// `bootstrap` must outlive the returned comm: its abort() ends the job. The caller's current CUDA device is left as
// it was. Throws kimi::Error when the build has no NCCL.
std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, const NcclOptions& options = {});

}  // namespace kimi::dist
