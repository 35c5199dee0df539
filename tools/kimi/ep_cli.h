// tools/kimi/ep_cli.h: what `kimi generate --ep N` and `kimi bench --ep N` share (docs/ep.md): the --ep flag's
// checks, the transport, the one-reporter output and the job's error handling.
//
// Every rank runs the same command line under `mpirun -np N` and checks the same flags, so a bad flag fails on
// every rank before the transport opens (each rank exits 2; mpirun ends the job). After the transport is up, an
// error on one rank (a checkpoint that does not load there, memory, a configuration that differs) would leave the
// other ranks waiting in a collective: run_ep_job prints it and ends every rank (Comm::abort).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "dist/comm.h"
#include "kimi/device.h"

namespace kimi::cli {

// --ep's checks before anything is loaded: ep >= 0 (0 = off) and, when on, the CPU device (`device_flag` is the
// --device value as typed). Errors start "`cmd`: --ep: ".
void check_ep_flag(const std::string& cmd, int ep, Device device, const std::string& device_flag);

// The transport for --ep N (N >= 1): MPI, whose world size must be N (`mpirun -np N`; N = 1 also runs without
// mpirun, as an MPI singleton), or the loopback for N = 1 in a build without MPI. Throws kimi::Error naming --ep
// otherwise.
std::unique_ptr<dist::Comm> open_ep(const std::string& cmd, int ep);

// Runs body(comm) with comm = open_ep(cmd, ep) when ep > 0, else null. With more than one rank, an exception from
// the body is printed ("kimi: <error> (rank r of N; aborting every rank)") and ends every rank's process.
int run_ep_job(const std::string& cmd, int ep, const std::function<int(dist::Comm*)>& body);

// Where a command's report goes: `out` on rank 0 (or without --ep), /dev/null on the other ranks.
class ReportOut {
 public:
  ReportOut(const dist::Comm* comm, std::FILE* out, const std::string& cmd);
  std::FILE* get() const { return null_ ? null_.get() : out_; }
  bool quiet() const { return bool(null_); }  // a rank other than 0: writes no report, JSON or CSV

 private:
  std::FILE* out_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> null_{nullptr, &std::fclose};
};

}  // namespace kimi::cli
