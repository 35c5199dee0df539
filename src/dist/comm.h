// dist/comm.h: the transport of expert parallelism: ranks and the four collectives the EP step uses.
//
//   all_gather(send[n], recv[N*n])             recv[r*n .. r*n+n) = rank r's send
//   all_to_all_v(rows of `row_bytes` bytes)    rank r's block d (send_counts[d] rows at send_displs[d]) lands on
//                                              rank d at recv_displs[r]; recv_counts[s] must equal what s sends
//   all_reduce_sum(f64/i64 data[n])            data = the elementwise sum over ranks (same order on every rank)
//   barrier()
// Counts and displacements are in rows. Every rank calls the same collectives in the same order.
// Implementations: a loopback (one process, world size 1) and OpenMPI (comm_mpi.cpp, built with KIMI_EP when
// MPI is found). Errors: every MPI call's return code is checked (MPI_ERRORS_RETURN on the communicator) and
// a failure throws kimi::Error naming the collective, the rank and MPI's message; a rank that dies leaves the
// job to mpirun's teardown, which kills the others (tests/dist: the rank-exit test bounds the time). A rank that
// catches an error mid-step calls abort() (never returns to MPI_Finalize, which would wait for the blocked peers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace kimi::dist {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "loopback", "mpi"

  virtual void all_gather(const void* send, size_t bytes, void* recv) = 0;
  virtual void all_to_all_v(const void* send, std::span<const int64_t> send_counts,
                            std::span<const int64_t> send_displs, void* recv, std::span<const int64_t> recv_counts,
                            std::span<const int64_t> recv_displs, size_t row_bytes) = 0;
  virtual void all_reduce_sum(std::span<double> data) = 0;
  virtual void all_reduce_sum(std::span<int64_t> data) = 0;
  virtual void barrier() = 0;
  // Ends every rank's process with `code` (MPI_Abort); for an error on one rank, so that the others, possibly
  // blocked in a collective, do not wait for it forever. Print the error first: this does not return.
  [[noreturn]] virtual void abort(int code) = 0;
};

// World size 1: every collective is a copy.
std::unique_ptr<Comm> make_loopback_comm();

// Whether this build has the MPI transport (KIMI_EP=ON and MPI found at configure time).
bool mpi_available();

// MPI_COMM_WORLD, initialising MPI (MPI_THREAD_FUNNELED) if needed; the last Comm made here finalises it.
// Throws kimi::Error when the build has no MPI.
std::unique_ptr<Comm> make_mpi_comm();

}  // namespace kimi::dist
