// python/src/view.cpp: ndarray -> TensorView (see view.h).
#include "view.h"

#include <atomic>

#include "kimi/error.h"

namespace kimi::py {

namespace {

std::atomic<int> g_cpu_threads{0};

[[noreturn]] void fail(const char* op, const char* arg, const std::string& expected, const std::string& got) {
  throw Error(std::string(op) + ": argument '" + arg + "': expected " + expected + ", got " + got);
}

DType to_dtype(const char* op, const char* arg, nb::dlpack::dtype t) {
  using Code = nb::dlpack::dtype_code;
  const auto code = Code(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::f32;
    if (code == Code::Float && t.bits == 16) return DType::f16;
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::UInt && t.bits == 8) return DType::u8;
    if (code == Code::Int && t.bits == 32) return DType::i32;
    if (code == Code::Int && t.bits == 64) return DType::i64;
  }
  static const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string name = t.code < 7 ? names[t.code] : "code " + std::to_string(int(t.code));
  fail(op, arg, "dtype float32, bfloat16, float16, uint8, int32 or int64",
       name + std::to_string(int(t.bits)) + (t.lanes != 1 ? "x" + std::to_string(int(t.lanes)) : ""));
}

Device to_device(const char* op, const char* arg, int type, int id) {
  if (type == nb::device::cpu::value || type == nb::device::cuda_host::value) return Device::cpu();
  if (type == nb::device::cuda::value || type == nb::device::cuda_managed::value) return Device::cuda(id);
  fail(op, arg, "a CPU or CUDA tensor", "DLPack device type " + std::to_string(type));
}

}  // namespace

TensorView view(const char* op, const char* arg, const Array& a) {
  const size_t ndim = a.ndim();
  if (ndim > size_t(kMaxDims)) fail(op, arg, "at most " + std::to_string(kMaxDims) + " dimensions", std::to_string(ndim));
  TensorView t;
  t.data = const_cast<void*>(a.data());
  t.dtype = to_dtype(op, arg, a.dtype());
  t.device = to_device(op, arg, a.device_type(), a.device_id());
  t.ndim = int(ndim);
  for (size_t d = 0; d < ndim; ++d) {
    t.shape[d] = int64_t(a.shape(d));
    t.strides[d] = int64_t(a.stride(d));
  }
  return t;
}

TensorView view(const char* op, const char* arg, const OptArray& a) {
  return a ? view(op, arg, *a) : TensorView{};
}

Weight weight(const char* op, const char* arg, const OptArray& w, const OptArray& scale) {
  return Weight{view(op, arg, w), view(op, (std::string(arg) + ".scale").c_str(), scale)};
}

Context context(uintptr_t stream) {
  return Context{reinterpret_cast<void*>(stream), g_cpu_threads.load()};
}

void set_cpu_threads(int n) {
  if (n < 0) throw Error("set_num_threads: argument 'n': expected >= 0 (0 = OpenMP's default), got " + std::to_string(n));
  g_cpu_threads.store(n);
}

int cpu_threads() {
  return g_cpu_threads.load();
}

}  // namespace kimi::py
