// Harness cases for kimi/ops/gather.h against src/verify/oracle/gather.h: the embedding lookup (a bf16 table,
// f32 rows out) and the model's row selection (f32 activations), strided sources and outputs, repeated
// and boundary indices, i32 and i64 index tensors. A gather only converts: the bound is exact (0) when the
// output dtype holds the source's, and the oracle rounds like the store otherwise.
#include <random>

#include "kimi/ops/gather.h"
#include "verify/oracle/gather.h"
#include "verify/cases/buf.h"
#include "verify/cases/case.h"

namespace kimi::verify {

namespace {
struct Shape {
  int64_t R, D, N;
  int64_t src_pad, out_pad;  // row padding: strided views
  DType index;
};

std::string shape_str(const Shape& s) {
  return "R=" + std::to_string(s.R) + " D=" + std::to_string(s.D) + " N=" + std::to_string(s.N) + " " +
         std::string(dtype_name(s.index)) + (s.src_pad || s.out_pad ? " strided" : "");
}
}  // namespace

void add_gather_cases(CaseList& list, Scale scale) {
  std::vector<Shape> shapes;
  if (scale == Scale::test) {
    shapes = {{1, 1, 1, 0, 0, DType::i64},   {7, 17, 12, 0, 0, DType::i32}, {50, 129, 9, 3, 2, DType::i64},
              {512, 256, 70, 0, 0, DType::i32}, {300, 1000, 3, 5, 0, DType::i64}, {4, 8, 0, 0, 0, DType::i64}};
  } else {
    shapes = {{16384, 2304, 512, 0, 0, DType::i32}, {4096, 7168, 512, 0, 0, DType::i32},  // embeddings
              {512, 7168, 8, 0, 0, DType::i64}};                                             // last rows of a batch
  }
  // (source, output) dtypes: the embedding lookups (16-bit table -> f32), same-dtype copies, a rounding store
  const std::pair<DType, DType> pairs[] = {{DType::f32, DType::f32},   {DType::bf16, DType::f32}, {DType::bf16, DType::bf16},
                                           {DType::f16, DType::f32},   {DType::f16, DType::f16},  {DType::f32, DType::bf16}};
  for (const Shape& s : shapes) {
    for (const auto& pair : pairs) {
      {
        const DType src_t = pair.first, out_t = pair.second;
        if (scale == Scale::check && (src_t == DType::f16 || out_t != DType::f32)) continue;
        list.push_back({"gather_rows", shape_str(s) + " -> " + std::string(dtype_name(out_t)), src_t, 0.0,
                        [=](Device dev) {
                          std::mt19937_64 rng(7 + s.R * 131 + s.D * 7 + s.N);
                          Buf src(dev, src_t, {s.R, s.D}, s.src_pad), out(dev, out_t, {s.N, s.D}, s.out_pad);
                          Buf rows(Device::cpu(), s.index, {s.N});
                          src.uniform(rng, -4, 4);
                          std::vector<int64_t> idx;
                          for (int64_t n = 0; n < s.N; ++n)  // the last row, the first, repeats, random rows
                            idx.push_back(n == 0 ? s.R - 1 : n == 1 ? 0 : n == 2 ? s.R - 1 : int64_t(rng() % uint64_t(s.R)));
                          rows.set_ints(idx);
                          const double ms = time_call(scale, dev, [&] { gather_rows(src, rows, out); });
                          std::vector<double> ref = oracle::gather_rows(src.to_f64(), s.D, idx);
                          for (double& v : ref) v = round_as(out_t, v);
                          Compare cmp;
                          cmp.output("out", out, ref);
                          return cmp.result(ms);
                        }});
      }
    }
  }
}

}  // namespace kimi::verify
