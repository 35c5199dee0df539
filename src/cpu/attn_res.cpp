// CPU Block Attention Residuals (SPEC 8): one token (row) per loop iteration, rows spread over threads.
// Scores and the softmax are computed in double (d-long reductions, and a softmax that may see
// scores in the hundreds); the mix of the raw candidates accumulates in fp32.
#include "cpu/attn_res.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/tensor_io.h"

namespace kimi::cpu {

void attn_res(TensorView partial, std::span<const TensorView> blocks, TensorView proj_w, TensorView norm_w, float eps,
              TensorView out, const Context& ctx) {
  const int64_t rows = partial.size(0), d = partial.size(1);
  const int64_t m = int64_t(blocks.size()) + 1;  // candidates: blocks..., partial
  if (rows == 0 || d == 0) return;
  // The pseudo-query: norm_w * proj_w (the norm weight folded into the projection), in double.
  std::vector<double> q(static_cast<size_t>(d));
  {
    const std::vector<float> pw = to_f32(proj_w), nw = to_f32(norm_w);
    for (int64_t i = 0; i < d; ++i) q[size_t(i)] = double(nw[size_t(i)]) * double(pw[size_t(i)]);
  }
#pragma omp parallel num_threads(threads(ctx))
  {
    std::vector<float> v(static_cast<size_t>(m * d)), o(static_cast<size_t>(d));
    std::vector<double> s(static_cast<size_t>(m));
#pragma omp for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < m; ++c) load_row(c + 1 < m ? blocks[size_t(c)] : partial, row, v.data() + c * d);
      if (m == 1) {  // a single candidate has weight exactly 1
        store_row(out, row, v.data());
        continue;
      }
      double smax = -INFINITY;
      for (int64_t c = 0; c < m; ++c) {
        const float* vc = v.data() + c * d;
        // Four independent partial sums per reduction (instruction-level parallelism; still double).
        double ss4[4] = {0, 0, 0, 0}, dot4[4] = {0, 0, 0, 0};
        int64_t i = 0;
        for (; i + 4 <= d; i += 4) {
          for (int k = 0; k < 4; ++k) {
            const double x = vc[i + k];
            ss4[k] += x * x;
            dot4[k] += x * q[size_t(i + k)];
          }
        }
        for (; i < d; ++i) {
          ss4[0] += double(vc[i]) * vc[i];
          dot4[0] += double(vc[i]) * q[size_t(i)];
        }
        const double ss = (ss4[0] + ss4[1]) + (ss4[2] + ss4[3]), dot = (dot4[0] + dot4[1]) + (dot4[2] + dot4[3]);
        // s = sum_i (v_i * rsqrt(mean(v^2) + eps)) * q_i; a zero candidate scores 0 even with eps = 0.
        const double sc = dot == 0 ? 0.0 : dot / std::sqrt(ss / double(d) + double(eps));
        s[size_t(c)] = sc;
        smax = std::max(smax, sc);
      }
      double z = 0;
      for (int64_t c = 0; c < m; ++c) z += (s[size_t(c)] = std::exp(s[size_t(c)] - smax));
      std::fill(o.begin(), o.end(), 0.f);
      for (int64_t c = 0; c < m; ++c) {
        const float p = float(s[size_t(c)] / z);
        if (p == 0.f) continue;  // saturated softmax: the candidate contributes nothing
        const float* vc = v.data() + c * d;
        for (int64_t i = 0; i < d; ++i) o[size_t(i)] += p * vc[i];
      }
      store_row(out, row, o.data());
    }
  }
}

}  // namespace kimi::cpu
