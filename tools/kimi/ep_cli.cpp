// tools/kimi/ep_cli.cpp: the --ep setup shared by `kimi generate` and `kimi bench` (the contract: ep_cli.h).
#include "ep_cli.h"

#include <fmt/core.h>

#include <exception>

#include "kimi/error.h"

namespace kimi::cli {

void check_ep_flag(const std::string& cmd, int ep, Device device, const std::string& device_flag) {
  if (ep < 0) throw Error(cmd + ": --ep: expected a number of ranks >= 1 (0 = off), got " + std::to_string(ep));
  if (ep > 0 && device.type != DeviceType::cpu)
    throw Error(cmd + ": --ep: expected --device cpu (expert parallelism runs on CPU ranks; the GPU transport is "
                "not written), got --device " + device_flag);
}

std::unique_ptr<dist::Comm> open_ep(const std::string& cmd, int ep) {
  if (ep < 1) throw Error(cmd + ": --ep: expected a number of ranks >= 1, got " + std::to_string(ep));
  if (!dist::mpi_available()) {
    if (ep == 1) return dist::make_loopback_comm();
    throw Error(cmd + ": --ep: this build has no MPI transport (configure with -DKIMI_EP=ON and OpenMPI "
                "installed: libopenmpi-dev, openmpi-bin), so only --ep 1 runs; got --ep " + std::to_string(ep));
  }
  std::unique_ptr<dist::Comm> comm = dist::make_mpi_comm();
  if (comm->size() != ep)
    throw Error(cmd + ": --ep: expected the number of ranks mpirun started (" + std::to_string(comm->size()) +
                "; run as `mpirun -np " + std::to_string(ep) + " kimi " + cmd + " ... --ep " + std::to_string(ep) +
                "`), got " + std::to_string(ep));
  return comm;
}

int run_ep_job(const std::string& cmd, int ep, const std::function<int(dist::Comm*)>& body) {
  const std::unique_ptr<dist::Comm> comm = ep > 0 ? open_ep(cmd, ep) : nullptr;
  if (!comm || comm->size() == 1) return body(comm.get());
  try {
    return body(comm.get());
  } catch (const std::exception& e) {
    fmt::print(stderr, "kimi: {} (rank {} of {}; aborting every rank)\n", e.what(), comm->rank(), comm->size());
    comm->abort(1);
  }
  return 1;  // not reached: abort() ends the process
}

ReportOut::ReportOut(const dist::Comm* comm, std::FILE* out, const std::string& cmd) : out_(out) {
  if (!comm || comm->rank() == 0) return;
  null_.reset(std::fopen("/dev/null", "w"));
  if (!null_) throw Error(cmd + ": --ep: cannot open /dev/null on rank " + std::to_string(comm->rank()));
}

}  // namespace kimi::cli
