// dist/device_plan.h: the any-rank step plan (planner.h) and one rank's fixed-slot layouts, as plain functions
// that a CUDA thread or a host loop runs (KIMI_HD: __host__ __device__ under nvcc). The CUDA EP step launches them
// on the device from the all-gathered counts, so the step has no host synchronisation (dist/plan_cuda.h); the CPU
// tests run the same functions in loops and compare with plan_step / dispatch_layout / receive_layout
// (tests/dist/test_device_plan.cpp). No allocation, no exception, no std:: algorithm: every array is the caller's.
//
// Notation: N ranks, E experts, K = top_k, H = sum_e m_e holder slots (piece i = holder slot i of the flattened
// placement: hold[hold_start[e] + j] = holders[e][j], hold_expert[i] = e), C = per-peer slot rows (S*K), `me` this
// rank, T its tokens. Every rank computes the identical global plan (integer arithmetic, fixed order) from the same
// counts: no negotiation and no host work.
//
// Global plan (same as plan_step's any-rank policy, planner.h; equal segment for segment):
//   plan_expert(e)       c[e] = sum_s counts[s, e]; so[s, e] = sum_{s' < s} counts[s', e]      (one thread per e)
//   plan_serial()        pieces floor/ceil(c_e / m_e) on the holders, home_load; targets (the P mod N largest home
//                        loads, ties lower rank, get q + 1); pieces sorted by (rank, length desc, index) (heap sort);
//                        an overloaded rank gives the tails of its largest pieces; the two-pointer walk hands the
//                        tails to the underloaded ranks in rank order; segments per expert (kept head, then its
//                        shares, i.e. by begin); load; stats                                  (ONE thread)
// Fixed-slot layouts of rank `me` (the all-to-alls move C rows to and from every peer: block d of the send buffer is
// rows [d*C, d*C + C), block s of the receive buffer rows [s*C, s*C + C); rows past a block's count are not read):
//   send_block(d)        first[e, d] = rows of me's pairs of experts < e sent to d; send_count[d] (one thread per d)
//   slot numbers         number[i] = the rank of slot i among me's slots of expert ids[i], in slot order (the CPU
//                        loop: slot_numbers; the device: a one-warp kernel, plan_cuda.cu)
//   send_row(i)          slot i's global index g = so[me, e] + number[i] lies in one segment of e, on rank d;
//                        send_row[i] = d*C + first[e, d] + (me's pairs of e on d before g)   (one thread per slot)
//   expert_rows(e)       rs[s, e] = me's rows of source s's pairs of e; gbase[s, e] = sum_{s' < s} rs[s', e];
//                        erows[e] = sum_s rs[s, e]                                           (one thread per e)
//   source_rows(s)       recv_first[s, e] = sum_{e' < e} rs[s, e']; recv_count[s]             (one thread per s)
//   expert_offsets()     off[l + 1] = off[l] + erows[resident[l]] (R + 1 entries, off[R] = load)   (ONE thread)
//   grouped_rows(s, e)   grouped row off[l] + gbase[s, e] + j is received row s*C + recv_first[s, e] + j
//                        (l = local_of[e]; j < rs[s, e])                                   (one thread per (s, e))
//   combine_order(t)     comb_slot[t*K + r] = token t's slot of its r-th smallest expert       (one thread per token)
// These are exactly the rows of layout.h's layouts placed in fixed slots: send block d holds, in order, the rows of
// dispatch_layout's block d ((expert, g) ascending); received block s holds receive_layout's rows from s; the
// grouped rows are receive_layout's grouped_from, each received row r of source s mapped to s*C + r - recv_displs[s].
// Bounds (any-rank plan): a source's rows to one peer <= T*K <= S*K = C; a rank's load <= ceil(P/N) <= S*K, the
// grouped buffers' rows. A violation (impossible for this policy, planner.h) sets stats[kError] and the write is
// skipped: never past a buffer.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define KIMI_HD __host__ __device__
#else
#define KIMI_HD
#endif

namespace kimi::dist::dplan {

// stats [kStats] (i64): what EpStepStats reports, and the bound check.
enum Stat { kTotal = 0, kMoved, kMovedSegments, kDonorPieces, kUnderloaded, kError, kStats };
// stats[kError] bits.
inline constexpr int64_t kErrSendBlock = 1, kErrLoad = 2, kErrNotResident = 4, kErrInternal = 8;

struct Dims {
  int32_t n = 0, e = 0, k = 0, me = 0, r = 0;  // ranks, experts, top_k, this rank, resident experts
  int64_t h = 0;                               // holder slots (pieces)
  int64_t t = 0;                               // this rank's tokens
  int64_t cap = 0;                             // C: rows per peer slot (S*K)
  int64_t recv_cap = 0;                        // grouped rows (S*K)
};

// Sizes of the arrays below, in elements.
KIMI_HD inline int64_t max_shares(const Dims& d) { return d.h + d.n; }        // donor pieces + underloaded ranks
KIMI_HD inline int64_t max_segments(const Dims& d) { return 2 * d.h + d.n; }  // heads + shares

struct Global {
  const int32_t* counts;      // [N*E] all-gathered counts[s * E + e]
  const int32_t* hold_start;  // [E + 1]
  const int32_t* hold;        // [H] holder rank of piece i (holders[e][0] = home first)
  const int32_t* hold_expert; // [H] expert of piece i
  int64_t* c;                 // [E]
  int64_t* so;                // [N*E] source offsets
  int64_t* home_load;         // [N]
  int64_t* target;            // [N]
  int64_t* load;              // [N]
  int64_t* give;              // [H] pairs of piece i's tail moved away
  int32_t* order;             // [H] pieces by (rank, length desc, index)
  int32_t* share_first;       // [H] piece i's shares: [share_first[i], share_first[i] + share_count[i])
  int32_t* share_count;       // [H]
  int32_t* sh_rank;           // [max_shares]
  int64_t* sh_begin;          // [max_shares]
  int64_t* sh_end;            // [max_shares]
  int32_t* seg_start;         // [E + 1] expert e's segments [seg_start[e], seg_start[e + 1])
  int32_t* seg_rank;          // [max_segments]
  int64_t* seg_begin;         // [max_segments]
  int64_t* seg_end;           // [max_segments]
  int32_t* seg_moved;         // [max_segments] 1: a replica share
  int64_t* stats;             // [kStats]
};

struct Local {
  const int32_t* ids;       // [T*K] this rank's routing, slot order
  const int32_t* local_of;  // [E] expert -> index into the resident experts, or -1
  const int32_t* resident;  // [R] ascending
  int64_t* first;           // [E*N] first[e * N + d]
  int32_t* send_count;      // [N]
  int32_t* number;          // [T*K]
  int32_t* send_row;        // [T*K] slot -> row of the send (and back) buffer [N*C]
  int64_t* rs;              // [N*E]
  int64_t* gbase;           // [N*E]
  int64_t* erows;           // [E]
  int64_t* recv_first;      // [N*E]
  int32_t* recv_count;      // [N]
  int32_t* off;             // [R + 1]
  int32_t* grouped_from;    // [recv_cap] grouped row -> received row (of [N*C])
  int32_t* comb_slot;       // [T*K]
};

KIMI_HD inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
KIMI_HD inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Piece j of m over c pairs: [begin, begin + len), len = floor/ceil(c / m) (the first c mod m pieces one more).
KIMI_HD inline int64_t piece_len(int64_t c, int64_t m, int64_t j) { return c / m + (j < c % m ? 1 : 0); }
KIMI_HD inline int64_t piece_begin(int64_t c, int64_t m, int64_t j) { return j * (c / m) + min64(j, c % m); }

KIMI_HD inline void plan_expert(const Dims& d, const Global& g, int32_t e) {
  int64_t at = 0;
  for (int32_t s = 0; s < d.n; ++s) {
    g.so[int64_t(s) * d.e + e] = at;
    at += g.counts[int64_t(s) * d.e + e];
  }
  g.c[e] = at;
}

// Piece i's length (its expert's c and holder count from the placement).
KIMI_HD inline int64_t piece_length(const Global& g, int64_t i) {
  const int32_t e = g.hold_expert[i];
  const int64_t m = g.hold_start[e + 1] - g.hold_start[e];
  return piece_len(g.c[e], m, i - g.hold_start[e]);
}

// Sort key order: a before b when (rank asc, length desc, index asc).
KIMI_HD inline bool piece_before(const Global& g, int32_t a, int32_t b) {
  if (g.hold[a] != g.hold[b]) return g.hold[a] < g.hold[b];
  const int64_t la = piece_length(g, a), lb = piece_length(g, b);
  if (la != lb) return la > lb;
  return a < b;
}

KIMI_HD inline void sift_down(const Global& g, int32_t* v, int64_t root, int64_t n) {
  for (;;) {
    int64_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && piece_before(g, v[child], v[child + 1])) ++child;
    if (!piece_before(g, v[root], v[child])) return;
    const int32_t tmp = v[root];
    v[root] = v[child];
    v[child] = tmp;
    root = child;
  }
}

KIMI_HD inline void plan_serial(const Dims& d, const Global& g) {
  for (int k = 0; k < kStats; ++k) g.stats[k] = 0;
  int64_t total = 0;
  for (int32_t e = 0; e < d.e; ++e) total += g.c[e];
  g.stats[kTotal] = total;
  for (int32_t r = 0; r < d.n; ++r) g.home_load[r] = 0;
  for (int64_t i = 0; i < d.h; ++i) g.home_load[g.hold[i]] += piece_length(g, i);
  // Targets: the P mod N ranks of largest home load (ties: lower rank) get q + 1.
  const int64_t q = total / d.n, rem = total % d.n;
  for (int32_t r = 0; r < d.n; ++r) {
    int64_t pos = 0;
    for (int32_t x = 0; x < d.n; ++x)
      pos += g.home_load[x] > g.home_load[r] || (g.home_load[x] == g.home_load[r] && x < r) ? 1 : 0;
    g.target[r] = q + (pos < rem ? 1 : 0);
  }
  // Pieces by (rank, length desc, index): heap sort.
  for (int64_t i = 0; i < d.h; ++i) g.order[i] = int32_t(i);
  for (int64_t i = d.h / 2 - 1; i >= 0; --i) sift_down(g, g.order, i, d.h);
  for (int64_t end = d.h - 1; end > 0; --end) {
    const int32_t tmp = g.order[0];
    g.order[0] = g.order[end];
    g.order[end] = tmp;
    sift_down(g, g.order, 0, end);
  }
  // Donations: each overloaded rank gives the tails of its largest pieces.
  for (int64_t i = 0; i < d.h; ++i) {
    g.give[i] = 0;
    g.share_first[i] = 0;
    g.share_count[i] = 0;
  }
  for (int64_t at = 0; at < d.h;) {
    const int32_t r = g.hold[g.order[at]];
    int64_t x = g.home_load[r] - g.target[r];
    for (; at < d.h && g.hold[g.order[at]] == r; ++at) {
      const int32_t i = g.order[at];
      if (x <= 0) continue;
      g.give[i] = min64(x, piece_length(g, i));
      x -= g.give[i];
      g.stats[kDonorPieces] += g.give[i] > 0 ? 1 : 0;
    }
  }
  for (int32_t r = 0; r < d.n; ++r) g.stats[kUnderloaded] += g.target[r] > g.home_load[r] ? 1 : 0;
  // Two-pointer walk: donor tails (in `order`) -> underloaded ranks in rank order.
  int32_t r = 0;
  int64_t filled = 0, shares = 0;
  for (int64_t at = 0; at < d.h; ++at) {
    const int32_t i = g.order[at];
    if (g.give[i] == 0) continue;
    const int32_t e = g.hold_expert[i];
    const int64_t j = i - g.hold_start[e], m = g.hold_start[e + 1] - g.hold_start[e];
    const int64_t end = piece_begin(g.c[e], m, j) + piece_len(g.c[e], m, j);
    int64_t pos = end - g.give[i];
    g.share_first[i] = int32_t(shares);
    while (pos < end) {
      while (r < d.n && filled >= g.target[r] - g.home_load[r]) {
        ++r;
        filled = 0;
      }
      if (r == d.n || shares == max_shares(d)) {  // sum of gives = sum of deficits (planner.h)
        g.stats[kError] |= kErrInternal;
        return;
      }
      const int64_t take = min64(end - pos, g.target[r] - g.home_load[r] - filled);
      g.sh_rank[shares] = r;
      g.sh_begin[shares] = pos;
      g.sh_end[shares] = pos + take;
      ++shares;
      ++g.share_count[i];
      filled += take;
      pos += take;
    }
  }
  // Segments per expert, by begin: each piece's kept head, then its shares.
  int64_t n_seg = 0;
  for (int32_t r2 = 0; r2 < d.n; ++r2) g.load[r2] = 0;
  for (int32_t e = 0; e < d.e; ++e) {
    g.seg_start[e] = int32_t(n_seg);
    const int64_t m = g.hold_start[e + 1] - g.hold_start[e];
    for (int64_t j = 0; j < m; ++j) {
      const int64_t i = g.hold_start[e] + j, b = piece_begin(g.c[e], m, j), end = b + piece_len(g.c[e], m, j);
      if (end - g.give[i] > b) {
        g.seg_rank[n_seg] = g.hold[i];
        g.seg_begin[n_seg] = b;
        g.seg_end[n_seg] = end - g.give[i];
        g.seg_moved[n_seg] = 0;
        g.load[g.hold[i]] += end - g.give[i] - b;
        ++n_seg;
      }
      for (int64_t x = g.share_first[i]; x < g.share_first[i] + g.share_count[i]; ++x) {
        g.seg_rank[n_seg] = g.sh_rank[x];
        g.seg_begin[n_seg] = g.sh_begin[x];
        g.seg_end[n_seg] = g.sh_end[x];
        g.seg_moved[n_seg] = 1;
        g.load[g.sh_rank[x]] += g.sh_end[x] - g.sh_begin[x];
        g.stats[kMoved] += g.sh_end[x] - g.sh_begin[x];
        ++g.stats[kMovedSegments];
        ++n_seg;
      }
    }
  }
  g.seg_start[d.e] = int32_t(n_seg);
}

// Pairs of [lo, hi) of expert e's order that segments on `rank` cover.
KIMI_HD inline int64_t rows_on(const Global& g, int32_t e, int32_t rank, int64_t lo, int64_t hi) {
  int64_t sum = 0;
  for (int32_t x = g.seg_start[e]; x < g.seg_start[e + 1]; ++x)
    if (g.seg_rank[x] == rank) sum += max64(0, min64(hi, g.seg_end[x]) - max64(lo, g.seg_begin[x]));
  return sum;
}

KIMI_HD inline void send_block(const Dims& d, const Global& g, const Local& l, int32_t dest) {
  int64_t at = 0;
  for (int32_t e = 0; e < d.e; ++e) {
    l.first[int64_t(e) * d.n + dest] = at;
    const int64_t lo = g.so[int64_t(d.me) * d.e + e];
    at += rows_on(g, e, dest, lo, lo + g.counts[int64_t(d.me) * d.e + e]);
  }
  if (at > d.cap) g.stats[kError] |= kErrSendBlock;  // only one thread per dest writes; the bit is idempotent
  l.send_count[dest] = int32_t(min64(at, d.cap));
}

// The CPU form of the slot numbers (the device: a one-warp kernel in slot order); seen [E] scratch.
inline void slot_numbers(const Dims& d, const Local& l, int64_t* seen) {
  for (int32_t e = 0; e < d.e; ++e) seen[e] = 0;
  for (int64_t i = 0; i < d.t * d.k; ++i) l.number[i] = int32_t(seen[l.ids[i]]++);
}

KIMI_HD inline void send_row(const Dims& d, const Global& g, const Local& l, int64_t i) {
  const int32_t e = l.ids[i];
  const int64_t lo = g.so[int64_t(d.me) * d.e + e], gi = lo + l.number[i];
  int32_t a = g.seg_start[e], b = g.seg_start[e + 1];  // first segment with end > gi (segments tile [0, c_e))
  while (a < b) {
    const int32_t mid = a + (b - a) / 2;
    if (g.seg_end[mid] > gi) b = mid;
    else a = mid + 1;
  }
  const int32_t dest = g.seg_rank[a];
  const int64_t row = l.first[int64_t(e) * d.n + dest] + rows_on(g, e, dest, lo, gi);
  l.send_row[i] = int32_t(int64_t(dest) * d.cap + min64(row, d.cap - 1));  // row < C (send_block checks)
}

KIMI_HD inline void expert_rows(const Dims& d, const Global& g, const Local& l, int32_t e) {
  int64_t at = 0;
  for (int32_t s = 0; s < d.n; ++s) {
    const int64_t x = int64_t(s) * d.e + e, lo = g.so[x];
    l.rs[x] = rows_on(g, e, d.me, lo, lo + g.counts[x]);
    l.gbase[x] = at;
    at += l.rs[x];
  }
  l.erows[e] = at;
}

KIMI_HD inline void source_rows(const Dims& d, const Local& l, int32_t s) {
  int64_t at = 0;
  for (int32_t e = 0; e < d.e; ++e) {
    l.recv_first[int64_t(s) * d.e + e] = at;
    at += l.rs[int64_t(s) * d.e + e];
  }
  l.recv_count[s] = int32_t(at);
}

KIMI_HD inline void expert_offsets(const Dims& d, const Global& g, const Local& l) {
  int64_t at = 0, computed = 0;
  l.off[0] = 0;
  for (int32_t x = 0; x < d.r; ++x) {
    at += l.erows[l.resident[x]];
    l.off[x + 1] = int32_t(min64(at, d.recv_cap));
  }
  for (int32_t e = 0; e < d.e; ++e) {
    computed += l.erows[e];
    if (l.erows[e] > 0 && l.local_of[e] < 0) g.stats[kError] |= kErrNotResident;
  }
  if (computed > d.recv_cap) g.stats[kError] |= kErrLoad;
}

KIMI_HD inline void grouped_rows(const Dims& d, const Local& l, int32_t s, int32_t e) {
  const int32_t loc = l.local_of[e];
  const int64_t x = int64_t(s) * d.e + e;
  if (loc < 0 || l.rs[x] == 0) return;
  const int64_t base = l.off[loc] + l.gbase[x], from = int64_t(s) * d.cap + l.recv_first[x];
  for (int64_t j = 0; j < l.rs[x] && base + j < d.recv_cap; ++j) l.grouped_from[base + j] = int32_t(from + j);
}

KIMI_HD inline void combine_order(const Dims& d, const Local& l, int64_t t) {
  int32_t* cs = l.comb_slot + t * d.k;
  for (int32_t r = 0; r < d.k; ++r) {  // insertion sort of the token's K slots by expert (distinct per token)
    const int32_t v = int32_t(t * d.k + r);
    int32_t at = r;
    while (at > 0 && l.ids[cs[at - 1]] > l.ids[v]) {
      cs[at] = cs[at - 1];
      --at;
    }
    cs[at] = v;
  }
}

}  // namespace kimi::dist::dplan
