// src/verify/oracle/norm.h: fp64 oracles of SPEC 3, written plainly from the spec. Row-major vectors;
// `rows` rows of `d` values. `round_x` rounds to the input dtype where SPEC says the model does.
#pragma once

#include <functional>
#include <vector>

namespace kimi::oracle {

using Vec = std::vector<double>;
using Round = std::function<double(double)>;  // identity for f32

Vec rms_norm(const Vec& x, const Vec& w, int64_t rows, int64_t d, double eps, const Round& round_x);
Vec gated_rms_norm(const Vec& o, const Vec* z, const Vec& w, int64_t rows, int64_t d, double eps);
Vec l2_norm(const Vec& x, int64_t rows, int64_t d, double eps);
double sigmoid(double x);
double silu(double x);
double softplus(double x);

}  // namespace kimi::oracle
