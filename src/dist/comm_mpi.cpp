// dist/comm_mpi.cpp: the MPI transport (OpenMPI) over MPI_COMM_WORLD (the contract: comm.h).
// Rows travel as one contiguous MPI datatype of row_bytes bytes, so counts stay rows (int, checked).
// MPI_ERRORS_RETURN on the communicator: a failing call returns, and check() throws with MPI's message.
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "kimi/error.h"

namespace kimi::dist {

namespace {

int g_live = 0;          // MpiComm objects alive
bool g_we_init = false;  // MPI_Init_thread was ours: the last MpiComm finalises

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        throw Error("dist::make_mpi_comm: MPI_Init_thread failed");
      g_we_init = true;
    }
    check("MPI_Comm_set_errhandler", MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    check("MPI_Comm_rank", MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    check("MPI_Comm_size", MPI_Comm_size(MPI_COMM_WORLD, &size_));
    ++g_live;
  }
  ~MpiComm() override {
    if (--g_live == 0 && g_we_init) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  CommMemory memory() const override { return CommMemory::host; }
  void* cuda_stream() const override { return nullptr; }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    check("MPI_Allgather", MPI_Allgather(send, to_int("bytes", int64_t(bytes)), MPI_BYTE, recv,
                                          to_int("bytes", int64_t(bytes)), MPI_BYTE, MPI_COMM_WORLD));
  }

  void all_to_all_v(const void* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                    void* recv, std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                    size_t row_bytes) override {
    const auto n = size_t(size_);
    for (auto [arg, v] : {std::pair{"send_counts", send_counts}, std::pair{"send_displs", send_displs},
                          std::pair{"recv_counts", recv_counts}, std::pair{"recv_displs", recv_displs}})
      if (v.size() != n)
        throw Error("dist::mpi::all_to_all_v: argument '" + std::string(arg) + "': expected " + std::to_string(n) +
                    " values (world size), got " + std::to_string(v.size()) + " on rank " + std::to_string(rank_));
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    for (size_t i = 0; i < n; ++i) {
      sc[i] = to_int("send_counts", send_counts[i]);
      sd[i] = to_int("send_displs", send_displs[i]);
      rc[i] = to_int("recv_counts", recv_counts[i]);
      rd[i] = to_int("recv_displs", recv_displs[i]);
    }
    MPI_Datatype row;
    check("MPI_Type_contiguous", MPI_Type_contiguous(to_int("row_bytes", int64_t(row_bytes)), MPI_BYTE, &row));
    check("MPI_Type_commit", MPI_Type_commit(&row));
    const int rc_a2a = MPI_Alltoallv(send, sc.data(), sd.data(), row, recv, rc.data(), rd.data(), row, MPI_COMM_WORLD);
    MPI_Type_free(&row);
    check("MPI_Alltoallv", rc_a2a);
  }

  void all_reduce_sum(std::span<double> data) override {
    check("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, data.data(), to_int("data", int64_t(data.size())), MPI_DOUBLE,
                                         MPI_SUM, MPI_COMM_WORLD));
  }
  void all_reduce_sum(std::span<int64_t> data) override {
    check("MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, data.data(), to_int("data", int64_t(data.size())), MPI_INT64_T,
                                         MPI_SUM, MPI_COMM_WORLD));
  }
  void barrier() override { check("MPI_Barrier", MPI_Barrier(MPI_COMM_WORLD)); }
  void synchronize() override {}
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it ever did
  }

 private:
  void check(const char* call, int code) const {
    if (code == MPI_SUCCESS) return;
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    throw Error("dist::mpi: " + std::string(call) + " failed on rank " + std::to_string(rank_) + " of " +
                std::to_string(size_) + ": " + std::string(msg, size_t(len)));
  }
  int to_int(const char* arg, int64_t v) const {
    if (v < 0 || v > INT_MAX)
      throw Error("dist::mpi: argument '" + std::string(arg) + "': expected 0 <= value <= INT_MAX (MPI counts), got " +
                  std::to_string(v));
    return int(v);
  }
  int rank_ = 0, size_ = 1;
};

}  // namespace

bool mpi_available() { return true; }
std::unique_ptr<Comm> make_mpi_comm() { return std::make_unique<MpiComm>(); }

}  // namespace kimi::dist
