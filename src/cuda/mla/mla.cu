// Launchers of src/cuda/mla/mla.h: host tables (tiles, lens / slots, destinations) uploaded once per call on
// ctx.cuda_stream, stream-ordered scratch, then the kernels of gemm.cuh, prefill.cuh, cache_write.cuh, decode.cuh.
//
// Heuristics (mla_decode): the tensor-core attend's splits and head groups from decode_plan.h; the FFMA attend's splits
// per sequence S = ceil(SMs / (N * head groups)), capped by the tiles of the longest sequence, so that
// N * groups * S CTAs (one per SM: ~150 KB of shared memory each) fill one wave. The absorb / merge / project work
// split (decode_proj.cuh) from decode_plan.h. mla_decode's absorb, tensor-core attend, merge and project are launched
// with programmatic_launch (pdl.cuh; each kernel's wait is documented where it is); the FFMA attend the plain way.
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "cuda/check.cuh"
#include "cuda/elementwise.cuh"
#include "cuda/index.cuh"
#include "cuda/mla/cache_write.cuh"
#include "cuda/mla/decode.cuh"
#include "cuda/mla/decode_options.h"
#include "cuda/mla/decode_plan.h"
#include "cuda/mla/decode_proj.cuh"
#include "cuda/mla/decode_tc.h"
#include "cuda/mla/decode_wg.h"
#include "cuda/mla/gemm.cuh"
#include "cuda/mla/mla.h"
#include "cuda/mla/options.h"
#include "cuda/mla/prefill.cuh"
#include "cuda/pdl.cuh"
#include "cuda/runtime.h"
#include "cuda/scratch.cuh"
#include "kimi/error.h"

namespace kimi::cuda {

namespace {
using std::to_string;

cudaStream_t stream_of(const Context& ctx) { return static_cast<cudaStream_t>(ctx.cuda_stream); }

void check_grid(const char* op, const char* what, int64_t v, int64_t max) {
  if (v > max) throw Error(std::string(op) + ": CUDA grid too large: " + what + " = " + to_string(v) + " > " + to_string(max));
}

template <class Kern>
void allow_smem(Kern* k, size_t bytes) {
  KIMI_CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}
}  // namespace

void mla_prefill(TensorView q, TensorView latent, TensorView k_pe, const Weight& w_kvb, TensorView gate,
                 const std::vector<int64_t>& cu, const MlaDims& d, TensorView o, const Context& ctx) {
  const int64_t B = q.size(0), T = q.size(1), M = B * T;
  const int64_t H = d.heads, R = d.kv_lora, P = d.qk_rope, Dn = d.qk_nope, Dv = d.v_dim, Dk = Dn + P, Dkv = Dn + Dv;
  if (mla_prefill_gemm(q, latent, k_pe, w_kvb, gate, cu, d, o, ctx)) return;  // bf16 operands: tensor cores
  if (Dk > mla::kPfMaxDk || Dv > mla::kPfMaxDv)
    throw Error("mla_prefill: the CUDA backend supports Dn + P <= " + to_string(mla::kPfMaxDk) + " and Dv <= " +
                to_string(mla::kPfMaxDv) + "; got Dn + P = " + to_string(Dk) + ", Dv = " + to_string(Dv));
  if (M == 0) return;
  if (MlaLaunchRecord* rec = mla_launch_options().record) ++rec->prefill_ffma;

  // Query tiles (m0 = first token of the sequence, i0 = first query within it, nq), latest first: the longest
  // causal rows start first.
  std::vector<std::pair<int64_t, int64_t>> segs;  // (m0, len)
  if (!cu.empty()) {
    for (size_t i = 0; i + 1 < cu.size(); ++i)
      if (cu[i + 1] > cu[i]) segs.push_back({cu[i], cu[i + 1] - cu[i]});
  } else {
    for (int64_t b = 0; b < B; ++b) segs.push_back({b * T, T});
  }
  struct Tile {
    int64_t m0, i0, nq;
  };
  std::vector<Tile> tiles;
  for (auto [m0, len] : segs)
    for (int64_t i0 = 0; i0 < len; i0 += mla::kPfBQ) tiles.push_back({m0, i0, std::min<int64_t>(mla::kPfBQ, len - i0)});
  std::stable_sort(tiles.begin(), tiles.end(), [](const Tile& a, const Tile& b) { return a.i0 > b.i0; });
  if (tiles.empty()) return;
  std::vector<int64_t> tab;
  for (const Tile& t : tiles) tab.insert(tab.end(), {t.m0, t.i0, t.nq});

  const int64_t nout = H * Dkv;
  check_grid("mla_prefill", "token tiles (B*T / 64)", (M + mla::kGemmBM - 1) / mla::kGemmBM, 65535);
  check_grid("mla_prefill", "heads", H, 65535);
  check_grid("mla_prefill", "query tiles", int64_t(tiles.size()), 0x7fffffff);
  const cudaStream_t s = stream_of(ctx);
  refuse_capture(s, "mla_prefill");
  const DeviceGuard device_guard(q.device.index);
  const Scratch tab_d = upload(tab, s);
  const Scratch kv(size_t(M) * size_t(nout) * sizeof(float), s);  // [M, H*(Dn+Dv)] fp32

  // kv = latent W_kvb^T
  {
    const dim3 grid(unsigned((nout + mla::kGemmBN - 1) / mla::kGemmBN), unsigned((M + mla::kGemmBM - 1) / mla::kGemmBM));
    mla::gemm_awt_kernel<<<grid, mla::kGemmThreads, 0, s>>>(latent.data, elem_type(latent.dtype), latent.strides[0],
                                                            latent.strides[1], T, w_kvb.w.data, elem_type(w_kvb.w.dtype),
                                                            w_kvb.w.strides[0], kv.get<float>(), nout, M, nout, int(R));
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
  // causal attention per (query tile, head)
  mla::PrefillParams p{};
  p.q = q.data, p.tq = elem_type(q.dtype), p.q_s0 = q.strides[0], p.q_s1 = q.strides[1], p.q_s2 = q.strides[2];
  p.kv = kv.get<float>(), p.ldkv = nout;
  p.pe = k_pe.data, p.tp = elem_type(k_pe.dtype), p.p_s0 = k_pe.strides[0], p.p_s1 = k_pe.strides[1];
  if (gate.present()) p.gate = gate.data, p.tg = elem_type(gate.dtype), p.g_s0 = gate.strides[0], p.g_s1 = gate.strides[1];
  p.o = o.data, p.to = elem_type(o.dtype), p.o_s0 = o.strides[0], p.o_s1 = o.strides[1], p.o_s2 = o.strides[2];
  p.tiles = tab_d.get<int64_t>();
  p.T = T, p.Dn = int(Dn), p.P = int(P), p.Dv = int(Dv), p.scale = d.scale;
  const size_t smem = mla::prefill_smem_bytes(int(Dk), int(Dv));
  allow_smem(mla::mla_prefill_attn_kernel, smem);
  mla::mla_prefill_attn_kernel<<<dim3(unsigned(tiles.size()), unsigned(H)), mla::kPfThreads, smem, s>>>(p);
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void mla_cache_write(TensorView latent, TensorView k_pe, TensorView cache, const Index& start, const Index& slots,
                     const Context& ctx) {
  const int64_t N = latent.size(0), T = latent.size(1), R = latent.size(2), P = k_pe.size(2);
  const int64_t rows = N * T;
  if (rows == 0) return;
  check_grid("mla_cache_write", "rows N*T", rows, 0x7fffffff);
  const cudaStream_t s = stream_of(ctx);
  if (!start.on_device())
    refuse_capture(s, "mla_cache_write with host start / slots (pass them as CUDA tensors to capture it)");
  const DeviceGuard device_guard(cache.device.index);
  std::optional<Scratch> dst_d;
  if (start.on_device()) {  // dst on the device: -1 for an out-of-range slot or start (the row is not written)
    dst_d.emplace(size_t(N) * sizeof(int64_t), s);
    mla::cache_dst_kernel<<<unsigned((N + 127) / 128), 128, 0, s>>>(dev_index(start.device), dev_index(slots.device), N,
                                                                    T, cache.size(0), cache.size(1), cache.strides[0],
                                                                    cache.strides[1], dst_d->get<int64_t>());
    KIMI_CUDA_CHECK(cudaGetLastError());
  } else {
    std::vector<int64_t> dst(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n)
      dst[size_t(n)] = slots.host[size_t(n)] * cache.strides[0] + start.host[size_t(n)] * cache.strides[1];
    dst_d.emplace(upload(dst, s));
  }
  mla::cache_write_kernel<<<unsigned(rows), 128, 0, s>>>(
      latent.data, elem_type(latent.dtype), latent.strides[0], latent.strides[1], k_pe.data, elem_type(k_pe.dtype),
      k_pe.strides[0], k_pe.strides[1], cache.data, elem_type(cache.dtype), cache.strides[1], dst_d->get<int64_t>(), T,
      int(R), int(P));
  KIMI_CUDA_CHECK(cudaGetLastError());
}

void mla_decode(TensorView q, TensorView cache, const Index& lens, const Index& slots, const Weight& w_kvb,
                TensorView gate, const MlaDims& d, TensorView o, const Context& ctx) {
  const int64_t N = q.size(0);
  const int64_t H = d.heads, R = d.kv_lora, P = d.qk_rope, Dn = d.qk_nope, Dv = d.v_dim, RP = R + P;
  const int dev = q.device.index;
  // The attend's family (decode_options.h): bf16 tensor cores (decode_tc.cuh) for bf16 queries over an f32 or bf16
  // cache, else (or where its shapes do not fit) the fp32 FFMA kernel (decode.cuh), which keeps the f32 bar.
  const MlaDecodePath path = mla_decode_path();
  // MlaDecodePath::wgmma: the tensor-core family with decode_wg.cuh's attend where it fits, else decode_tc.cuh's.
  bool tc = false, wg = false;
  if (path != MlaDecodePath::ffma &&
      (path == MlaDecodePath::tensor_cores || path == MlaDecodePath::wgmma || q.dtype == DType::bf16)) {
    const DeviceGuard device_guard(dev);
    tc = mla::tc_attend_fits(cache.dtype, H, R, RP, dev);
    wg = tc && path == MlaDecodePath::wgmma && mla::wg_attend_fits(cache, H, R, RP, dev);
  }
  if (!tc && R > 2 * mla::kDecThreads)
    throw Error("mla_decode: the CUDA backend supports R <= " + to_string(2 * mla::kDecThreads) + "; got R = " + to_string(R));
  static_assert(2 * mla::kDecThreads <= mla::kProjMaxR);  // decode_proj.cuh's project (tc_attend_fits: R <= 512 too)
  if (N == 0) return;
  check_grid("mla_decode", "N", N, 65535);
  check_grid("mla_decode", "heads", H, 0x7fffffff);
  // decode_proj.cuh's grids: heads x (latent column blocks of >= 32, or output row blocks of >= 16)
  check_grid("mla_decode", "heads x column / row blocks", H * std::max((R + 31) / 32, (Dv + 15) / 16), 0x7fffffff);
  const size_t attend_smem = mla::attend_smem_bytes(int(RP));
  if (!tc && attend_smem > 227 * 1024)
    throw Error("mla_decode: R + P = " + to_string(RP) + " needs " + to_string(attend_smem) +
                " bytes of shared memory per CTA (the CUDA backend has 227 KB)");
  if ((Dn + P) * 4 > 48 * 1024) throw Error("mla_decode: the CUDA backend supports Dn + P <= 12288");

  const cudaStream_t s = stream_of(ctx);
  if (!lens.on_device()) refuse_capture(s, "mla_decode with host lens / slots (pass them as CUDA tensors to capture it)");
  const DeviceGuard device_guard(dev);
  const int sms = sm_count(dev);

  // Splits (device lens: planned for the cache's length L, the bound the host knows).
  const int64_t max_len = lens.on_device() ? cache.size(1) : *std::max_element(lens.host.begin(), lens.host.end());
  const int64_t groups = (H + mla::kDecHG - 1) / mla::kDecHG;
  int64_t S = 0, tiles_per_split = 0, hg = 0;
  if (tc) {
    // decode_plan.h; each sequence's splits are cut from its own length on the device (decode_tc.cuh).
    const mla::TcDecodePlan plan = mla::tc_decode_plan(N, H, max_len, R, RP, cache.dtype == DType::f32 ? 4 : 2, sms);
    S = plan.splits, hg = plan.head_group;
  } else {
    // One wave of CTAs (see the header), rows_per_split a multiple of the tile.
    const int64_t ntiles = (max_len + mla::kDecTJ - 1) / mla::kDecTJ;
    S = std::clamp<int64_t>((sms + N * groups - 1) / (N * groups), 1, ntiles);
    tiles_per_split = (ntiles + S - 1) / S;
    S = (ntiles + tiles_per_split - 1) / tiles_per_split;
    check_grid("mla_decode", "head groups", groups, 0x7fffffff);
  }
  const MlaDecodeStages stages = mla_decode_stages();
  if (MlaDecodeRecord* rec = mla_decode_record()) {
    ++(tc ? rec->tensor_cores : rec->ffma);
    if (wg) ++rec->wgmma;
    rec->splits = S;
    rec->head_group = hg;
    if (S > 1 && stages == MlaDecodeStages::all) ++rec->merges;
  }

  // The attend's table, lens [N] then slots [N]: uploaded from host values, or (FFMA attend) written by the absorb
  // from the device form (an out-of-range length or slot becomes length 0: that sequence's o is NaN); the
  // tensor-core attend reads the device form itself, with the same rule.
  std::optional<Scratch> tab_d;
  if (!lens.on_device()) {
    std::vector<int64_t> tab(lens.host);
    tab.insert(tab.end(), slots.host.begin(), slots.host.end());
    tab_d.emplace(upload(tab, s));
  } else if (!tc) {
    tab_d.emplace(size_t(2 * N) * sizeof(int64_t), s);
  }
  // Scratch, each part 16-byte aligned: QL [N, H, RP] f32 (FFMA) or [N, H, kpq] bf16 (tensor cores: RP rounded up to
  // 16, zero padded), Opart [N, S, H, R], ML [N, S, H, 2], ol [N, H, R] (S > 1) f32.
  const auto al4 = [](int64_t n) { return size_t((n + 3) / 4 * 4); };
  const int64_t kpq = tc ? mla::tc_query_cols(RP) : RP;
  const size_t nql = tc ? al4((N * H * kpq + 1) / 2) : al4(N * H * RP);
  const size_t npart = al4(N * S * H * R), nml = al4(N * S * H * 2);
  const size_t nol = S > 1 ? al4(N * H * R) : 0;
  const Scratch buf((nql + npart + nml + nol) * sizeof(float), s);
  float* QL = buf.get<float>();
  float* Opart = QL + nql;
  float* ML = Opart + npart;
  float* OL = ML + nml;

  // Weight element type and 16-byte row chunks (decode_proj.cuh).
  const int tw = elem_type(w_kvb.w.dtype);
  const int64_t wesz = int64_t(w_kvb.w.element_size());
  const int wvec = reinterpret_cast<uintptr_t>(w_kvb.w.data) % 16 == 0 && (w_kvb.w.strides[0] * wesz) % 16 == 0;

  {  // absorb (+ the table from device lens / slots)
    mla::AbsorbParams p{};
    p.q = q.data, p.tq = elem_type(q.dtype), p.q_s0 = q.strides[0], p.q_s1 = q.strides[1];
    p.w = w_kvb.w.data, p.ldw = w_kvb.w.strides[0], p.wvec = wvec;
    if (tc)
      p.QLb = reinterpret_cast<__nv_bfloat16*>(QL);
    else
      p.QL = QL;
    p.kp = int(kpq);
    p.H = int(H), p.R = int(R), p.P = int(P), p.Dn = int(Dn), p.Dv = int(Dv);
    p.ncb = int((R + mla::kAbCols - 1) / mla::kAbCols);
    p.N = N, p.nt = int(mla::decode_absorb_tokens(Dn));
    if (lens.on_device() && !tc) {
      p.lens = dev_index(lens.device), p.slots = dev_index(slots.device);
      p.Nc = cache.size(0), p.L = cache.size(1), p.tab = tab_d->get<int64_t>();
    }
    const dim3 grid(unsigned(H * p.ncb), unsigned((N + p.nt - 1) / p.nt));
    const size_t smem = mla::absorb_smem_bytes(p.nt, p.Dn);
    if (tw == el_bf16)
      programmatic_launch(mla::mla_absorb_kernel<__nv_bfloat16>, grid, dim3(mla::kProjThreads), smem, s, p);
    else if (tw == el_f16)
      programmatic_launch(mla::mla_absorb_kernel<__half>, grid, dim3(mla::kProjThreads), smem, s, p);
    else
      programmatic_launch(mla::mla_absorb_kernel<float>, grid, dim3(mla::kProjThreads), smem, s, p);
  }
  if (stages == MlaDecodeStages::absorb) return;

  if (tc) {
    const int64_t* tab = lens.on_device() ? nullptr : tab_d->get<int64_t>();
    if (wg)
      mla::wg_attend(QL, cache, tab, tab ? tab + N : nullptr, &lens.device, &slots.device, Opart, ML, N, S, H, hg,
                     d.scale, s);
    else
      mla::tc_attend(QL, cache, tab, tab ? tab + N : nullptr, &lens.device, &slots.device, Opart, ML, N, S, H, hg, R,
                     d.scale, s);
  } else {
    mla::AttendParams p{};
    p.QL = QL;
    p.cache = cache.data, p.tc = elem_type(cache.dtype), p.c_s0 = cache.strides[0], p.c_s1 = cache.strides[1];
    p.lens = tab_d->get<int64_t>(), p.slots = p.lens + N;
    p.Opart = Opart, p.ML = ML;
    p.H = int(H), p.R = int(R), p.P = int(P), p.S = int(S);
    p.rows_per_split = tiles_per_split * mla::kDecTJ;
    p.scale = d.scale;
    const dim3 grid{unsigned(groups), unsigned(S), unsigned(N)};
    if (R <= mla::kDecThreads) {
      allow_smem(mla::mla_attend_kernel<1>, attend_smem);
      mla::mla_attend_kernel<1><<<grid, mla::kDecThreads, attend_smem, s>>>(p);
    } else {
      allow_smem(mla::mla_attend_kernel<2>, attend_smem);
      mla::mla_attend_kernel<2><<<grid, mla::kDecThreads, attend_smem, s>>>(p);
    }
    KIMI_CUDA_CHECK(cudaGetLastError());
  }
  if (stages == MlaDecodeStages::absorb_attend) return;

  if (S > 1) {  // merge the splits into ol
    mla::MergeParams p{};
    p.Opart = Opart, p.ML = ML, p.ol = OL;
    p.S = int(S), p.H = int(H), p.R = int(R), p.vec = R % 4 == 0 ? 4 : 1;
    const int64_t units = R / p.vec;
    p.sg = mla::decode_merge_groups(S, units, H, N, sms);
    const int64_t lanes = mla::kProjThreads / p.sg;
    p.ncb = int((units + lanes - 1) / lanes);
    const size_t smem = mla::merge_smem_bytes(p.S);  // S <= 4096: <= 20 KB
    programmatic_launch(mla::mla_merge_kernel, dim3(unsigned(H * p.ncb), unsigned(N)), dim3(mla::kProjThreads), smem,
                        s, p);
  }
  {  // project through W_kvb_v, gate
    mla::ProjParams p{};
    p.ol = S > 1 ? OL : Opart, p.ML = S > 1 ? nullptr : ML;
    p.w = w_kvb.w.data, p.ldw = w_kvb.w.strides[0], p.wvec = wvec;
    if (gate.present()) p.gate = gate.data, p.tg = elem_type(gate.dtype), p.g_s0 = gate.strides[0];
    p.o = o.data, p.to = elem_type(o.dtype), p.o_s0 = o.strides[0], p.o_s1 = o.strides[1];
    p.H = int(H), p.R = int(R), p.Dn = int(Dn), p.Dv = int(Dv);
    p.N = N, p.nt = mla::kProjNT;
    const int64_t token_blocks = (N + p.nt - 1) / p.nt;
    p.rows = int(mla::decode_project_rows(Dv, H, token_blocks, sms));
    p.nrb = int((Dv + p.rows - 1) / p.rows);
    const dim3 grid(unsigned(H * p.nrb), unsigned(token_blocks));
    const size_t smem = mla::project_smem_bytes(p.nt, p.R);
    if (tw == el_bf16)
      programmatic_launch(mla::mla_project_kernel<__nv_bfloat16>, grid, dim3(mla::kProjThreads), smem, s, p);
    else if (tw == el_f16)
      programmatic_launch(mla::mla_project_kernel<__half>, grid, dim3(mla::kProjThreads), smem, s, p);
    else
      programmatic_launch(mla::mla_project_kernel<float>, grid, dim3(mla::kProjThreads), smem, s, p);
  }
}

}  // namespace kimi::cuda
