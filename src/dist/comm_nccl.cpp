// dist/comm_nccl.cpp: the NCCL transport over GPUs (the contract: comm.h; docs/ep.md, "Transport and faults").
//
//   all_to_all_v    ncclGroupStart; per peer p: ncclSend(send_counts[p] rows), ncclRecv(recv_counts[p] rows) as
//                   ncclChar (count * row_bytes bytes; zero-count peers skipped); ncclGroupEnd
//   all_gather      ncclAllGather(bytes as ncclChar)
//   all_reduce_sum  ncclAllReduce in place, ncclFloat64 / ncclInt64, ncclSum
//   barrier         a one-int64 ncclAllReduce on a scratch word, then synchronize()
// Buffers are device memory on the comm's GPU; every collective is enqueued on the comm's stream and returns without
// a host sync. The communicator is non-blocking (ncclConfig_t::blocking = 0), so no NCCL call blocks the host:
// a call that answers ncclInProgress is followed by polling ncclCommGetAsyncError, and every wait (init, group end,
// stream completion, finalize) polls with the bound NcclOptions::timeout_s. An asynchronous error or the bound
// aborts the communicator (ncclCommAbort) and throws; later calls throw that the comm was aborted.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "dist/comm.h"
#include "kimi/error.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "the NCCL transport needs NCCL 2.14 or later (non-blocking communicators, ncclCommFinalize)"
#endif

namespace kimi::dist {

namespace {

using Clock = std::chrono::steady_clock;

// Sets the current CUDA device for a scope and restores the caller's on exit.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    if (device != saved_) cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (saved_ >= 0) cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

// NCCL_NVLS_ENABLE: 0 when unset; another value is an error unless allowed (comm.h, NcclOptions::allow_nvls).
// NOTE: NCCL reads its environment once, at the first NCCL call in the process, so this runs before any.
void set_nvls_off(bool allow_nvls) {
  const char* v = std::getenv("NCCL_NVLS_ENABLE");
  if (!v) {
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    return;
  }
  if (std::string(v) != "0" && !allow_nvls)
    throw Error("dist::make_nccl_comm: NCCL_NVLS_ENABLE=" + std::string(v) +
                " in the environment: kimi runs NCCL with NVLink multicast off (NCCL_NVLS_ENABLE=0; it can take a "
                "shared host's GPUs out of service); unset it, or set NcclOptions::allow_nvls to use multicast");
}

// What each rank all-gathers before ncclCommInitRankConfig: whether its checks passed, and (rank 0) the unique id.
struct Hello {
  int32_t ok;
  ncclUniqueId id;
};

class NcclComm final : public Comm {
 public:
  NcclComm(Comm& bootstrap, const NcclOptions& opt) : boot_(bootstrap), timeout_s_(opt.timeout_s) {
    const char* fn = "dist::make_nccl_comm";
    require_host_memory(bootstrap, fn, "bootstrap");
    rank_ = bootstrap.rank();
    size_ = bootstrap.size();
    // The local checks and rank 0's id travel together in one all-gather that every rank reaches, so that an error on
    // one rank is an error on every rank (none is left waiting in the bootstrap or in NCCL's init).
    std::string local_error;
    Hello hello;
    std::memset(&hello, 0, sizeof hello);
    try {
      if (!(opt.timeout_s > 0))
        throw Error(std::string(fn) + ": argument 'timeout_s': expected > 0 seconds, got " +
                    std::to_string(opt.timeout_s));
      int count = 0;
      const cudaError_t rc = cudaGetDeviceCount(&count);
      if (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver || (rc == cudaSuccess && count == 0))
        throw Error(std::string(fn) + ": no CUDA device visible on rank " + std::to_string(rank_) +
                    " (cudaGetDeviceCount: " + cudaGetErrorString(rc) + ", " + std::to_string(count) + " devices)");
      cuda_check("cudaGetDeviceCount", rc);
      device_ = opt.device < 0 ? rank_ % count : opt.device;
      if (device_ >= count)
        throw Error(std::string(fn) + ": argument 'device': expected 0 <= device < " + std::to_string(count) +
                    " (visible devices), got " + std::to_string(device_) + " on rank " + std::to_string(rank_));
      set_nvls_off(opt.allow_nvls);
      if (rank_ == 0) nccl_check("ncclGetUniqueId", ncclGetUniqueId(&hello.id));
      hello.ok = 1;
    } catch (const Error& e) {
      local_error = e.what();
    }
    std::vector<Hello> all(static_cast<size_t>(size_));
    bootstrap.all_gather(&hello, sizeof hello, all.data());
    if (!local_error.empty()) throw Error(local_error);
    for (int r = 0; r < size_; ++r)
      if (!all[size_t(r)].ok)
        throw Error(std::string(fn) + ": rank " + std::to_string(r) + " of " + std::to_string(size_) +
                    " could not set up its NCCL transport (its error is reported there); no comm on rank " +
                    std::to_string(rank_) + " either");
    const ncclUniqueId id = all[0].id;

    DeviceScope scope(device_);
    try {
      cuda_check("cudaSetDevice", cudaSetDevice(device_));
      if (opt.stream) {
        stream_ = static_cast<cudaStream_t>(opt.stream);
      } else {
        cuda_check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        own_stream_ = true;
      }
      cuda_check("cudaMalloc", cudaMalloc(&scratch_, sizeof(int64_t)));
      cuda_check("cudaMemset", cudaMemset(scratch_, 0, sizeof(int64_t)));
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      const ncclResult_t rc = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
      if (rc != ncclSuccess && rc != ncclInProgress) fail("ncclCommInitRankConfig", rc);
      wait_ready("ncclCommInitRankConfig");
    } catch (...) {
      abort_comm();  // a failed init's handle may be partly built: abort frees what exists
      release_cuda();
      throw;
    }
  }

  ~NcclComm() override {
    if (comm_) {
      try {
        synchronize();
        DeviceScope scope(device_);
        call("ncclCommFinalize", ncclCommFinalize(comm_));
        nccl_check("ncclCommDestroy", ncclCommDestroy(comm_));
        comm_ = nullptr;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s (while destroying the NCCL comm)\n", e.what());
        if (comm_) ncclCommAbort(comm_);
        comm_ = nullptr;
      }
    }
    release_cuda();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "nccl"; }
  CommMemory memory() const override { return CommMemory::device; }
  void* cuda_stream() const override { return stream_; }

  void all_gather(const void* send, size_t bytes, void* recv) override {
    live("all_gather");
    if (bytes == 0) return;
    call("ncclAllGather", ncclAllGather(send, recv, bytes, ncclChar, comm_, stream_));
  }

  void all_to_all_v(const void* send, std::span<const int64_t> send_counts, std::span<const int64_t> send_displs,
                    void* recv, std::span<const int64_t> recv_counts, std::span<const int64_t> recv_displs,
                    size_t row_bytes) override {
    live("all_to_all_v");
    const auto n = size_t(size_);
    for (auto [arg, v] : {std::pair{"send_counts", send_counts}, std::pair{"send_displs", send_displs},
                          std::pair{"recv_counts", recv_counts}, std::pair{"recv_displs", recv_displs}}) {
      if (v.size() != n)
        throw Error("dist::nccl::all_to_all_v: argument '" + std::string(arg) + "': expected " + std::to_string(n) +
                    " values (world size), got " + std::to_string(v.size()) + " on rank " + std::to_string(rank_));
      for (size_t p = 0; p < n; ++p)
        if (v[p] < 0)
          throw Error("dist::nccl::all_to_all_v: argument '" + std::string(arg) + "[" + std::to_string(p) +
                      "]': expected >= 0, got " + std::to_string(v[p]) + " on rank " + std::to_string(rank_));
    }
    const auto me = size_t(rank_);
    if (send_counts[me] != recv_counts[me])
      throw Error("dist::nccl::all_to_all_v: argument 'recv_counts[" + std::to_string(me) + "]': expected " +
                  std::to_string(send_counts[me]) + " (what this rank sends itself), got " +
                  std::to_string(recv_counts[me]) + " on rank " + std::to_string(rank_));
    const auto* s = static_cast<const char*>(send);
    auto* r = static_cast<char*>(recv);
    call("ncclGroupStart", ncclGroupStart());
    // NOTE: every Send/Recv between GroupStart and GroupEnd only records the operation; errors surface there or at
    // GroupEnd, which is always reached so that the group is closed.
    ncclResult_t first = ncclSuccess;
    const char* first_call = "";
    for (size_t p = 0; p < n; ++p) {
      ncclResult_t rc = ncclSuccess;
      if (send_counts[p] > 0) {
        rc = ncclSend(s + size_t(send_displs[p]) * row_bytes, size_t(send_counts[p]) * row_bytes, ncclChar, int(p),
                      comm_, stream_);
        if (rc != ncclSuccess && rc != ncclInProgress && first == ncclSuccess) {
          first = rc;
          first_call = "ncclSend";
        }
      }
      if (recv_counts[p] > 0) {
        rc = ncclRecv(r + size_t(recv_displs[p]) * row_bytes, size_t(recv_counts[p]) * row_bytes, ncclChar, int(p),
                      comm_, stream_);
        if (rc != ncclSuccess && rc != ncclInProgress && first == ncclSuccess) {
          first = rc;
          first_call = "ncclRecv";
        }
      }
    }
    const ncclResult_t end = ncclGroupEnd();
    if (first != ncclSuccess) fail(std::string(first_call) + " (all_to_all_v)", first);
    call("ncclGroupEnd (all_to_all_v)", end);
  }

  void all_reduce_sum(std::span<double> data) override {
    live("all_reduce_sum");
    if (data.empty()) return;
    call("ncclAllReduce", ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat64, ncclSum, comm_, stream_));
  }
  void all_reduce_sum(std::span<int64_t> data) override {
    live("all_reduce_sum");
    if (data.empty()) return;
    call("ncclAllReduce", ncclAllReduce(data.data(), data.data(), data.size(), ncclInt64, ncclSum, comm_, stream_));
  }

  void barrier() override {
    live("barrier");
    call("ncclAllReduce (barrier)", ncclAllReduce(scratch_, scratch_, 1, ncclInt64, ncclSum, comm_, stream_));
    synchronize();
  }

  void synchronize() override {
    live("synchronize");
    const auto start = Clock::now();
    for (int spin = 0;; ++spin) {
      const cudaError_t q = cudaStreamQuery(stream_);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        abort_comm();
        throw Error(where("synchronize") + ": cudaStreamQuery: " + cudaGetErrorString(q));
      }
      poll_async("synchronize", start);
      backoff(spin);
    }
    // An error NCCL found after the last kernel finished (a proxy thread's network failure).
    poll_async("synchronize", start);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    boot_.abort(code);
    std::_Exit(code);  // the bootstrap's abort does not return; this keeps [[noreturn]] honest if it ever did
  }

 private:
  std::string where(const std::string& call) const {
    return "dist::nccl: " + call + " failed on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           " (device " + std::to_string(device_) + ")";
  }
  std::string last_error() const {
    const char* m = ncclGetLastError(comm_);
    return m && *m ? m : "no further detail from NCCL";
  }
  void live(const char* fn) const {
    if (!comm_)
      throw Error("dist::nccl::" + std::string(fn) + ": the communicator of rank " + std::to_string(rank_) +
                  " was aborted after an earlier error or timeout; make a new one");
  }
  void cuda_check(const char* call, cudaError_t rc) const {
    if (rc != cudaSuccess) throw Error(where(call) + ": " + cudaGetErrorString(rc));
  }
  void nccl_check(const char* call, ncclResult_t rc) const {
    if (rc != ncclSuccess) throw Error(where(call) + ": " + ncclGetErrorString(rc) + " (" + last_error() + ")");
  }
  [[noreturn]] void fail(const std::string& call, ncclResult_t rc) {
    const std::string msg = where(call) + ": " + ncclGetErrorString(rc) + " (" + last_error() + ")";
    abort_comm();
    throw Error(msg);
  }
  // A call on the non-blocking comm: an error aborts it and throws; ncclInProgress waits until the comm is ready.
  void call(const std::string& name, ncclResult_t rc) {
    if (rc == ncclInProgress) return wait_ready(name);
    if (rc != ncclSuccess) fail(name, rc);
  }
  // Polls the comm's state until it leaves ncclInProgress (the bound: timeout_s).
  void wait_ready(const std::string& name) {
    const auto start = Clock::now();
    for (int spin = 0;; ++spin) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
      if (rc != ncclSuccess) fail(name + " (ncclCommGetAsyncError)", rc);
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) fail(name, state);
      check_time(name, start);
      backoff(spin);
    }
  }
  // One look at the comm's asynchronous state while waiting for the stream.
  void poll_async(const std::string& name, Clock::time_point start) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess) fail(name + " (ncclCommGetAsyncError)", rc);
    if (state != ncclSuccess && state != ncclInProgress) fail(name + ": asynchronous NCCL error", state);
    check_time(name, start);
  }
  void check_time(const std::string& name, Clock::time_point start) {
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited <= timeout_s_) return;
    abort_comm();
    throw Error(where(name) + ": timed out after " + std::to_string(waited) + " s (NcclOptions::timeout_s = " +
                std::to_string(timeout_s_) + "): a peer rank died, hangs, or did not call the same collectives in "
                "the same order; the communicator was aborted");
  }
  static void backoff(int spin) {
    if (spin < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  void abort_comm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }
  void release_cuda() {
    DeviceScope scope(device_);
    if (scratch_) cudaFree(scratch_);
    scratch_ = nullptr;
    if (own_stream_ && stream_) cudaStreamDestroy(stream_);
    stream_ = nullptr;
  }

  Comm& boot_;
  double timeout_s_;
  int rank_ = 0, size_ = 1, device_ = 0;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  void* scratch_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool nccl_available() { return true; }
std::unique_ptr<Comm> make_nccl_comm(Comm& bootstrap, const NcclOptions& options) {
  return std::make_unique<NcclComm>(bootstrap, options);
}

}  // namespace kimi::dist
