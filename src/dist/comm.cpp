// dist/comm.cpp: the loopback transport (world size 1) and the MPI / NCCL factories' refusal in builds without them.
#include "dist/comm.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "kimi/error.h"

namespace kimi::dist {

namespace {

void check_one(const char* fn, const char* arg, std::span<const int64_t> v) {
  if (v.size() != 1)
    throw Error(std::string("dist::loopback::") + fn + ": argument '" + arg +
                "': expected 1 value (world size 1), got " + std::to_string(v.size()));
}

class LoopbackComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "loopback"; }
  CommMemory memory() const override { return CommMemory::host; }
  void* cuda_stream() const override { return nullptr; }
  void all_gather(const void* send, size_t bytes, void* recv) override {
    if (bytes) std::memmove(recv, send, bytes);
  }
  void all_to_all_v(const void* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                    void* recv, std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                    size_t row_bytes) override {
    check_one("all_to_all_v", "send_counts", send_counts);
    check_one("all_to_all_v", "send_displs", send_displs);
    check_one("all_to_all_v", "recv_counts", recv_counts);
    check_one("all_to_all_v", "recv_displs", recv_displs);
    if (send_counts[0] != recv_counts[0])
      throw Error("dist::loopback::all_to_all_v: argument 'recv_counts[0]': expected " +
                  std::to_string(send_counts[0]) + " (what rank 0 sends), got " + std::to_string(recv_counts[0]));
    if (send_counts[0] > 0)
      std::memmove(static_cast<char*>(recv) + size_t(recv_displs[0]) * row_bytes,
                   static_cast<const char*>(send) + size_t(send_displs[0]) * row_bytes,
                   size_t(send_counts[0]) * row_bytes);
  }
  void all_reduce_sum(std::span<double>) override {}
  void all_reduce_sum(std::span<int64_t>) override {}
  void barrier() override {}
  void synchronize() override {}
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

}  // namespace

void require_host_memory(const Comm& comm, const char* fn, const char* arg) {
  if (comm.memory() != CommMemory::host)
    throw Error(std::string(fn) + ": argument '" + arg + "': expected a host-memory transport (loopback, mpi), got '" +
                comm.name() + "', whose buffers are device memory");
}

std::unique_ptr<Comm> make_loopback_comm() { return std::make_unique<LoopbackComm>(); }

#ifndef KIMI_WITH_MPI
bool mpi_available() { return false; }
std::unique_ptr<Comm> make_mpi_comm() {
  throw Error("dist::make_mpi_comm: this build has no MPI transport (configure with -DKIMI_EP=ON and OpenMPI "
              "installed: libopenmpi-dev, openmpi-bin; scripts/install-deps.sh)");
}
#endif

#ifndef KIMI_WITH_NCCL
bool nccl_available() { return false; }
std::unique_ptr<Comm> make_nccl_comm(Comm&, const NcclOptions&) {
  throw Error("dist::make_nccl_comm: this build has no NCCL transport (configure the cuda preset with "
              "-DKIMI_EP_NCCL=ON and NCCL installed: nccl.h and libnccl, e.g. in the CUDA toolkit)");
}
#endif

}  // namespace kimi::dist
