// tests/dist/rank_exit.cpp (under mpirun, driven by rank_exit.cmake): the last rank exits in the middle of an EP
// step (after the count all-gather, before the dispatch all_to_all_v) without finalising MPI; the others block in
// all_to_all_v. Expected: mpirun tears the job down and returns nonzero within a bounded time, naming the rank that
// exited; no rank hangs. Exits 0 only if the step completes (which is the failure the driver reports).
// --abort: the last rank instead catches an error, prints it and calls Comm::abort(3) (MPI_Abort).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "kimi/error.h"

int main(int argc, char** argv) {
  const bool abort_mode = argc > 1 && std::string(argv[1]) == "--abort";
  auto comm = kimi::dist::make_mpi_comm();
  const int n = comm->size(), me = comm->rank();
  std::vector<int64_t> mine{1}, all(static_cast<size_t>(n));
  comm->all_gather(mine.data(), sizeof(int64_t), all.data());
  if (me == n - 1 && abort_mode) {  // an error on one rank: reported, then abort() ends every rank
    try {
      throw kimi::Error("rank_exit: a failure on rank " + std::to_string(me));
    } catch (const kimi::Error& e) {
      std::fprintf(stderr, "kimi: %s (aborting every rank)\n", e.what());
      comm->abort(3);
    }
  }
  if (me == n - 1) {
    std::printf("rank_exit: rank %d exits mid-step\n", me);
    std::fflush(stdout);
    std::_Exit(3);
  }
  std::vector<int64_t> counts(size_t(n), 1), displs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) displs[size_t(i)] = i;
  std::vector<double> send(size_t(n), 1.0), recv(static_cast<size_t>(n));
  comm->all_to_all_v(send.data(), counts, displs, recv.data(), counts, displs, sizeof(double));
  std::printf("rank_exit: rank %d completed the step (unexpected)\n", me);
  return 0;
}
