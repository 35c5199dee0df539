// src/verify/cases/case.h: the one harness every operator goes through (llama.cpp's test-backend-ops
// model). A Case builds seeded inputs in realistic ranges, runs the operator on a device, computes
// the fp64 oracle on the same (dtype-rounded) inputs, and reports the relative error, NaN/Inf and
// guard-byte checks and the time. ctest asserts err <= tol for every case on every device;
// `kimi check` prints the same cases as a table.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "kimi/tensor.h"

namespace kimi::verify {

// test: small and odd sizes for ctest; check: Kimi K3 / Kimi-Linear shapes scaled to fit the machine.
enum class Scale { test, check };

struct Result {
  double err = 0;          // max over outputs of ||got - ref|| / ||ref||
  double ms = 0;           // wall time of the operator call (median of a few runs for Scale::check)
  bool finite = true;      // no NaN/Inf in any output
  bool guards_ok = true;   // no write outside the output views
  std::string detail;      // which output had the largest error, etc.
};

struct Case {
  std::string op;     // public function name, e.g. "kda_chunk_fwd"
  std::string shape;  // human-readable, e.g. "B=1 T=65 H=4 K=V=64 varlen"
  DType dtype;        // storage dtype of the main inputs
  double tol;         // bound on Result::err against the fp64 oracle
  std::function<Result(Device)> run;
};
using CaseList = std::vector<Case>;

// One function per operator family (src/verify/cases/cases_<family>.cpp).
void add_norm_cases(CaseList&, Scale);
void add_linear_cases(CaseList&, Scale);
void add_mxfp4_cases(CaseList&, Scale);
void add_conv_cases(CaseList&, Scale);
void add_kda_cases(CaseList&, Scale);
void add_kda_decode_cases(CaseList&, Scale);
void add_mla_cases(CaseList&, Scale);
void add_moe_cases(CaseList&, Scale);
void add_attn_res_cases(CaseList&, Scale);
void add_gather_cases(CaseList&, Scale);
void add_random_cases(CaseList&, Scale);
void add_sample_cases(CaseList&, Scale);

CaseList all_cases(Scale scale);

// ||got - ref|| / ||ref|| (ref all zero: ||got - ref||).
double rel_err(const std::vector<double>& got, const std::vector<double>& ref);
bool all_finite(const std::vector<double>& v);

// Accumulates outputs into a Result: err = max over outputs, finite = all finite, guards_ok = all.
class Compare {
 public:
  template <class BufT>
  void output(const std::string& name, const BufT& got, const std::vector<double>& ref) {
    values(name, got.to_f64(), ref);
    result_.guards_ok = result_.guards_ok && got.guards_ok();
  }
  void values(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref);
  Result result(double ms) {
    result_.ms = ms;
    Result r = result_;
    r.detail = worst_.empty() ? nonfinite_ : "worst: " + worst_ + (nonfinite_.empty() ? "" : "; " + nonfinite_);
    return r;
  }

 private:
  Result result_;
  std::string worst_, nonfinite_;  // the output with the largest error; outputs with NaN/Inf
};

// Runs fn once (Scale::test) or warm-up + median of several runs (Scale::check); returns ms.
double time_call(Scale scale, Device dev, const std::function<void()>& fn);

std::string dtype_str(DType t);

// Default bound for an output stored in dtype t against fp64: f32 1e-5 (SPEC 14), f16 1e-3,
// bf16 5e-3 (one rounding of the output is ~2e-3 RMS).
double tol_for(DType t);

// Rounds v as storing in dtype t would (identity for f32).
double round_as(DType t, double v);

}  // namespace kimi::verify
