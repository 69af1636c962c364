// explain: causal self-attention, forward (docs/kernels/05_attention.md) and backward
// (docs/kernels/10_attention_backward.md).
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "apps/explain/explain.h"

namespace reftrain::explain {

namespace {

// One head (NH=1) of size hs=2, so C=2; T=3 positions; B=1.
constexpr int B = 1, T = 3, HS = 2, C = HS, NH = 1;

double row_dot(const std::vector<double>& a, int i, const std::vector<double>& b, int j) {
  double s = 0.0;
  for (int c = 0; c < HS; ++c) s += a[size_t(i) * HS + c] * b[size_t(j) * HS + c];
  return s;
}

// How far the step-by-step values are from the kernel's: they agree to rounding.
void agree(Printer& out, const std::string& what, const std::vector<double>& mine,
           const std::vector<double>& kernel) {
  const double d = max_abs_diff(mine, kernel);
  out.line(std::string("  ") + what + (d < 1e-12 ? ": max |diff| < 1e-12" : ": DIFFERENT"));
}

struct AttentionProblem {
  std::vector<double> q, k, v, dout;  // [T,HS] each
  std::vector<double> qkv;            // [B,T,3C], the kernel's packed layout
};

std::vector<double> pack(const std::vector<double>& q, const std::vector<double>& k,
                         const std::vector<double>& v) {
  std::vector<double> qkv(size_t(T) * 3 * C);
  for (int t = 0; t < T; ++t) {
    for (int c = 0; c < C; ++c) {
      qkv[size_t(t) * 3 * C + c] = q[size_t(t) * C + c];
      qkv[size_t(t) * 3 * C + C + c] = k[size_t(t) * C + c];
      qkv[size_t(t) * 3 * C + 2 * C + c] = v[size_t(t) * C + c];
    }
  }
  return qkv;
}

AttentionProblem make_attention_problem(uint64_t seed) {
  Inputs in(seed);
  AttentionProblem p;
  p.q = in.uniform(size_t(T) * HS, -1, 1);
  p.k = in.uniform(size_t(T) * HS, -1, 1);
  p.v = in.uniform(size_t(T) * HS, -1, 1);
  p.dout = in.uniform(size_t(T) * HS, -1, 1);
  p.qkv = pack(p.q, p.k, p.v);
  return p;
}

// The kernel's output and probabilities for a packed qkv.
void forward(const std::vector<double>& qkv, std::vector<double>& y, std::vector<double>& att) {
  y.assign(size_t(T) * C, 0.0);
  att.assign(size_t(T) * T, 0.0);
  attention_forward(y.data(), att.data(), qkv.data(), B, T, C, NH);
}

// The fused kernel: the same output, and of the softmax only each row's logsumexp.
void forward_fused(const std::vector<double>& qkv, std::vector<double>& y,
                   std::vector<double>& lse) {
  y.assign(size_t(T) * C, 0.0);
  lse.assign(size_t(T), 0.0);
  attention_forward_fast(y.data(), lse.data(), qkv.data(), B, T, C, NH);
}

void print_inputs(Printer& out, const AttentionProblem& p) {
  out.section("inputs (one head: row t of q, k, v is position t)");
  out.mat("q [T,hs]", p.q, T, HS);
  out.mat("k [T,hs]", p.k, T, HS);
  out.mat("v [T,hs]", p.v, T, HS);
}

// dqkv split into dq, dk, dv.
void unpack(const std::vector<double>& dqkv, std::vector<double>& dq, std::vector<double>& dk,
            std::vector<double>& dv) {
  dq.assign(size_t(T) * C, 0.0), dk = dq, dv = dq;
  for (int t = 0; t < T; ++t) {
    for (int c = 0; c < C; ++c) {
      dq[size_t(t) * C + c] = dqkv[size_t(t) * 3 * C + c];
      dk[size_t(t) * C + c] = dqkv[size_t(t) * 3 * C + C + c];
      dv[size_t(t) * C + c] = dqkv[size_t(t) * 3 * C + 2 * C + c];
    }
  }
}

// The kernel's gradients split into dq, dk, dv, from dqkv starting at zero.
void backward(const AttentionProblem& p, const std::vector<double>& att, std::vector<double>& dq,
              std::vector<double>& dk, std::vector<double>& dv) {
  std::vector<double> dqkv(p.qkv.size(), 0.0), dp(size_t(T), 0.0);
  attention_backward(dqkv.data(), dp.data(), p.dout.data(), p.qkv.data(), att.data(), B, T, C, NH);
  unpack(dqkv, dq, dk, dv);
}

// The fused backward's, from the forward's out and lse only.
void backward_fused(const AttentionProblem& p, std::vector<double>& dq, std::vector<double>& dk,
                    std::vector<double>& dv) {
  std::vector<double> y, lse, dqkv(p.qkv.size(), 0.0);
  forward_fused(p.qkv, y, lse);
  attention_backward_fast(dqkv.data(), p.dout.data(), p.qkv.data(), y.data(), lse.data(), B, T, C,
                          NH);
  unpack(dqkv, dq, dk, dv);
}

void fd_check(Printer& out, const AttentionProblem& p, const std::vector<double>& dq,
              const std::vector<double>& dk, const std::vector<double>& dv) {
  out.section("finite-difference check of L = sum(dout * out), step 1e-6");
  auto loss = [&](const std::vector<double>& q, const std::vector<double>& k,
                  const std::vector<double>& v) {
    std::vector<double> y, att;
    forward(pack(q, k, v), y, att);
    double l = 0.0;
    for (size_t i = 0; i < y.size(); ++i) l += p.dout[i] * y[i];
    return l;
  };
  const double h = 1e-6;
  auto nudge = [&](std::vector<double> x, size_t i, double d) {
    x[i] += d;
    return x;
  };
  const size_t qi = size_t(2) * HS + 1, ki = 0, vi = size_t(1) * HS + 0;
  out.fd("dq[2][1]", dq[qi],
         (loss(nudge(p.q, qi, h), p.k, p.v) - loss(nudge(p.q, qi, -h), p.k, p.v)) / (2 * h));
  out.fd("dk[0][0]", dk[ki],
         (loss(p.q, nudge(p.k, ki, h), p.v) - loss(p.q, nudge(p.k, ki, -h), p.v)) / (2 * h));
  out.fd("dv[1][0]", dv[vi],
         (loss(p.q, p.k, nudge(p.v, vi, h)) - loss(p.q, p.k, nudge(p.v, vi, -h))) / (2 * h));
}

// The fused kernel runs the recurrence over every row and keeps only the logsumexps.
void fused_forward(Printer& out, const AttentionProblem& p, const std::vector<double>& y) {
  out.section("the fused kernel (attention_forward_fast): out, and lse instead of p");
  std::vector<double> yf, lse, mine(T, 0.0);
  forward_fused(p.qkv, yf, lse);
  for (int t = 0; t < T; ++t) {
    double m = -INFINITY, l = 0.0;
    for (int u = 0; u <= t; ++u) m = std::max(m, row_dot(p.q, t, p.k, u) / std::sqrt(double(HS)));
    for (int u = 0; u <= t; ++u) l += std::exp(row_dot(p.q, t, p.k, u) / std::sqrt(double(HS)) - m);
    mine[t] = m + std::log(l);
  }
  out.vec("lse [T] (attention_forward_fast)", lse);
  agree(out, "lse by hand vs the fused kernel", mine, lse);
  agree(out, "out of the fused kernel vs attention_forward", yf, y);
}

// One block of keys [u0, u1) of row t folded into the running m, l, acc as the fused kernel
// does it: the block's max first, one rescale of what was summed, then the block's terms.
void fold_tile(Printer& out, const Vec& s, const Vec& v, int u0, int u1, double& m, double& l,
               Vec& acc, bool rescale = true) {
  double block = -INFINITY;
  for (int u = u0; u < u1; ++u) block = std::max(block, s[u]);
  const double m_new = std::max(m, block);
  const bool first = m == -INFINITY;  // the kernel skips the rescale while m = -inf
  // `rescale` false is the bug of `--break no_rescale`: the old terms stay relative to the old max.
  const double c = first || !rescale ? 1.0 : std::exp(m - m_new);
  l *= c;
  for (double& a : acc) a *= c;
  for (int u = u0; u < u1; ++u) {
    const double e = std::exp(s[u] - m_new);
    l += e;
    for (int i = 0; i < HS; ++i) acc[i] += e * v[size_t(u) * HS + i];
  }
  m = m_new;
  out.line("    block max =" + num(block, "%8.4f") + "   mx =" + num(m, "%8.4f") +
           (first ? "   rho: none (mx was -inf)" : "   rho =" + num(c, "%7.4f")) +
           "   l =" + num(l, "%8.4f"));
  out.vec("  acc", acc);
}

// A second, longer problem: a row of the fused kernel that crosses from one key tile of 32 into
// the next, so that the block-wise rescale shows in numbers.
struct LongProblem {
  Vec q, k, v, qkv;
  int row = -1;        // the row whose running max moves most from tile 0 to tile 1
  std::vector<Vec> s;  // scaled scores of the rows from 32 on, -inf for u > t
};

// T = 40 random positions; `draw` picks the inputs, and the caller draws until one row's max
// moves from the first key tile to the second, so that the rescale does something.
LongProblem long_problem(uint64_t seed, int draw, int TT, int tile) {
  Inputs in(seed * 1000 + uint64_t(draw) + 1);
  LongProblem p;
  p.q = in.uniform(size_t(TT) * HS, -1, 1), p.k = in.uniform(size_t(TT) * HS, -1, 1);
  p.v = in.uniform(size_t(TT) * HS, -1, 1), p.qkv.assign(size_t(TT) * 3 * C, 0.0);
  for (int t = 0; t < TT; ++t) {
    for (int c = 0; c < C; ++c) {
      p.qkv[size_t(t) * 3 * C + c] = p.q[size_t(t) * C + c];
      p.qkv[size_t(t) * 3 * C + C + c] = p.k[size_t(t) * C + c];
      p.qkv[size_t(t) * 3 * C + 2 * C + c] = p.v[size_t(t) * C + c];
    }
  }
  p.s.assign(TT, Vec(TT, -INFINITY));
  double best = 0.0;
  for (int r = tile; r < TT; ++r) {
    for (int u = 0; u <= r; ++u) p.s[r][u] = row_dot(p.q, r, p.k, u) / std::sqrt(double(HS));
    const double gain = *std::max_element(&p.s[r][tile], &p.s[r][r + 1]) -
                        *std::max_element(&p.s[r][0], &p.s[r][tile]);
    if (gain > best) best = gain, p.row = r;
  }
  return p;
}

// A second, longer problem: a row of the fused kernel that crosses from one key tile of 32 into
// the next, so that the block-wise rescale shows in numbers.
void tile_crossing(Printer& out, uint64_t seed, bool rescale = true) {
  constexpr int TT = 40, kTile = 32;
  LongProblem lp;
  for (int draw = 0; lp.row < 0; ++draw) lp = long_problem(seed, draw, TT, kTile);
  const int t = lp.row;
  const Vec& v = lp.v;
  const std::vector<Vec>& rows = lp.s;
  Vec y(size_t(TT) * C), lse(TT);
  attention_forward_fast(y.data(), lse.data(), lp.qkv.data(), B, TT, C, NH);
  out.section("the fused kernel's key tiles: one row across two tiles of 32 keys");
  out.line("  (a second problem: one head, T=" + std::to_string(TT) +
           ", hs=2; row t=" + std::to_string(t) + " sees keys 0.." + std::to_string(t) + ")");
  double m = -INFINITY, l = 0.0;
  Vec acc(HS, 0.0);
  out.line("  tile 0, keys 0..31, below the diagonal: every key visible");
  fold_tile(out, rows[t], v, 0, kTile, m, l, acc, rescale);
  out.line("  tile 1, keys 32..63, the diagonal: keys " + std::to_string(t + 1) +
           "..63 get s = -inf, so p = 0");
  fold_tile(out, rows[t], v, kTile, t + 1, m, l, acc, rescale);
  Vec o(HS), mine = {0.0, 0.0, m + std::log(l)};
  for (int i = 0; i < HS; ++i) mine[i] = o[i] = acc[i] / l;
  out.vec("out[" + std::to_string(t) + "] = acc / l", o);
  out.scalar("lse[" + std::to_string(t) + "] = mx + log(l)", m + std::log(l));
  agree(out, "out and lse vs attention_forward_fast's", mine,
        {y[size_t(t) * C], y[size_t(t) * C + 1], lse[t]});
}

void run_attention(Printer& out, uint64_t seed) {
  const AttentionProblem p = make_attention_problem(seed);
  const double scale = 1.0 / std::sqrt(double(HS));
  out.title("attention: out[t] = sum_u softmax_u(q_t.k_u / sqrt(hs)) v_u, u <= t");
  out.line("(one head, T=3, hs=2; the causal mask keeps u <= t)");
  print_inputs(out, p);

  out.section("scores s[t][u] = (q_t . k_u) / sqrt(hs), 1/sqrt(2) = 0.7071");
  std::vector<double> s(size_t(T) * T, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) {
      s[size_t(t) * T + u] = row_dot(p.q, t, p.k, u) * scale;
      out.line("  " + at("s", t, u) + " = (" + in2(p.q[t * HS]) + "*" + in2(p.k[u * HS]) + " + " +
               in2(p.q[t * HS + 1]) + "*" + in2(p.k[u * HS + 1]) +
               ") * 0.7071 = " + num(s[size_t(t) * T + u], "%.4f"));
    }
  }
  out.section("causal mask: u > t is -inf before the softmax, so its p is 0");
  for (int t = 0; t < T; ++t) {
    std::string r = "   ";
    for (int u = 0; u < T; ++u) r += u <= t ? num(s[size_t(t) * T + u], "%9.4f") : "     -inf";
    out.line(r);
  }

  out.section("softmax per row: mx = row max, e = exp(s - mx), sum = sum(e), p = e/sum");
  std::vector<double> pr(size_t(T) * T, 0.0);
  for (int t = 0; t < T; ++t) {
    double m = -INFINITY, sum = 0.0;
    for (int u = 0; u <= t; ++u) m = std::max(m, s[size_t(t) * T + u]);
    std::vector<double> e(size_t(t) + 1);
    for (int u = 0; u <= t; ++u) sum += e[u] = std::exp(s[size_t(t) * T + u] - m);
    for (int u = 0; u <= t; ++u) pr[size_t(t) * T + u] = e[u] / sum;
    out.line("  row t=" + std::to_string(t) + ":  mx =" + num(m, "%9.4f") +
             "   sum =" + num(sum, "%9.4f"));
    out.vec("e", e);
  }
  std::vector<double> y, att;
  forward(p.qkv, y, att);
  out.mat("probabilities p [T,T] (attention_forward's att)", att, T, T);
  agree(out, "p by hand vs the kernel", pr, att);

  out.section("output out[t] = sum_u p[t][u] * v_u");
  std::vector<double> mine(size_t(T) * HS, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) {
      for (int c = 0; c < HS; ++c)
        mine[size_t(t) * HS + c] += pr[size_t(t) * T + u] * p.v[u * HS + c];
    }
  }
  out.mat("out [T,hs] (attention_forward)", y, T, HS);
  agree(out, "out by hand vs the kernel", mine, y);

  // The last row on which the running max moves after the first step, so that a rescaling
  // shows; the last row when there is none.
  int t = T - 1;
  for (int r = T - 1; r > 0; --r) {
    bool moves = false;
    for (int u = 1; u <= r; ++u) {
      moves |= s[size_t(r) * T + u] > *std::max_element(&s[size_t(r) * T], &s[size_t(r) * T + u]);
    }
    if (moves) {
      t = r;
      break;
    }
  }
  out.section("online softmax, row t=" + std::to_string(t) + ": one pass over u, no stored p");
  out.line("  mx = running max, l = running sum of exp(s - mx), acc = running sum of");
  out.line("  exp(s - mx) * v; a new max rescales l and acc by rho = exp(mx_old - mx_new)");
  out.line("  (mx starts at -inf and l, acc at 0, so the first step has rho = 0)");
  {
    double m = -INFINITY, l = 0.0;
    std::vector<double> acc(HS, 0.0);
    for (int u = 0; u <= t; ++u) {
      const double su = s[size_t(t) * T + u];
      const double m_new = std::max(m, su);
      const double c = std::exp(m - m_new);  // exp(-inf) = 0 on the first step
      const double e = std::exp(su - m_new);
      l = l * c + e;
      for (int i = 0; i < HS; ++i) acc[i] = acc[i] * c + e * p.v[u * HS + i];
      m = m_new;
      out.line("  u=" + std::to_string(u) + ": s =" + num(su, "%8.4f") +
               "  mx =" + num(m, "%8.4f") + "  rho =" + num(c, "%7.4f") +
               "  exp(s-mx) =" + num(e, "%7.4f") + "  l =" + num(l, "%7.4f"));
      out.vec("acc", acc);
    }
    std::vector<double> o(HS);
    for (int i = 0; i < HS; ++i) o[i] = acc[i] / l;
    const std::string ot = "out[" + std::to_string(t) + "]";
    out.vec(ot + " = acc / l", o);
    agree(out, "online vs attention_forward's " + ot, o, matrix_row(y, t, HS));
    out.scalar("logsumexp = mx + log(l)", m + std::log(l), "(all the fused backward keeps)");
  }
  fused_forward(out, p, y);
  tile_crossing(out, seed);

  out.section("backward (docs/kernels/10_attention_backward.md derives it)");
  out.mat("dout [T,hs] (upstream gradient)", p.dout, T, HS);
  std::vector<double> dq, dk, dv;
  backward(p, att, dq, dk, dv);
  out.mat("dq (attention_backward)", dq, T, HS);
  out.mat("dk", dk, T, HS);
  out.mat("dv", dv, T, HS);
  fd_check(out, p, dq, dk, dv);
}

void run_attention_backward(Printer& out, uint64_t seed) {
  const AttentionProblem p = make_attention_problem(seed);
  const double scale = 1.0 / std::sqrt(double(HS));
  out.title("attention backward: dv, dP, dS = P*(dP - rowsum(P*dP)), dq, dk");
  out.line("(one head, T=3, hs=2; the same q, k, v as `reftrain explain attention`)");
  print_inputs(out, p);
  std::vector<double> y, P;
  forward(p.qkv, y, P);
  out.mat("P [T,T] (forward's probabilities, kept for the backward)", P, T, T);
  out.mat("dout [T,hs] (upstream gradient dL/dout)", p.dout, T, HS);

  out.section("dP[t][u] = dout_t . v_u  (u <= t; 0 above the diagonal)");
  std::vector<double> dP(size_t(T) * T, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) dP[size_t(t) * T + u] = row_dot(p.dout, t, p.v, u);
  }
  out.mat("dP", dP, T, T);

  out.section("dv_u = sum_{t >= u} P[t][u] * dout_t");
  std::vector<double> dv(size_t(T) * HS, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) {
      for (int i = 0; i < HS; ++i) dv[u * HS + i] += P[size_t(t) * T + u] * p.dout[t * HS + i];
    }
  }
  out.mat("dv", dv, T, HS);

  out.section("softmax Jacobian: D_t = sum_u P[t][u]*dP[t][u], dS = P*(dP - D_t)");
  std::vector<double> D(T, 0.0), dS(size_t(T) * T, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) D[t] += P[size_t(t) * T + u] * dP[size_t(t) * T + u];
    for (int u = 0; u <= t; ++u) {
      dS[size_t(t) * T + u] = P[size_t(t) * T + u] * (dP[size_t(t) * T + u] - D[t]);
    }
  }
  out.vec("D (rowsum of P*dP)", D);
  out.mat("dS (each row sums to 0)", dS, T, T);

  out.section("dq_t = sum_u dS[t][u] k_u / sqrt(hs),  dk_u = sum_t dS[t][u] q_t / sqrt(hs)");
  std::vector<double> dq(size_t(T) * HS, 0.0), dk(size_t(T) * HS, 0.0);
  for (int t = 0; t < T; ++t) {
    for (int u = 0; u <= t; ++u) {
      for (int i = 0; i < HS; ++i) {
        dq[t * HS + i] += dS[size_t(t) * T + u] * p.k[u * HS + i] * scale;
        dk[u * HS + i] += dS[size_t(t) * T + u] * p.q[t * HS + i] * scale;
      }
    }
  }
  out.mat("dq", dq, T, HS);
  out.mat("dk", dk, T, HS);

  out.section("the kernel (attention_backward) computes the same");
  std::vector<double> kq, kk, kv;
  backward(p, P, kq, kk, kv);
  agree(out, "dq by hand vs the kernel", dq, kq);
  agree(out, "dk by hand vs the kernel", dk, kk);
  agree(out, "dv by hand vs the kernel", dv, kv);

  out.section("the fused backward (attention_backward_fast) keeps no P: D_t = dout_t . out_t,");
  out.line("  then p = exp(s - lse_t) recomputed, tile by tile");
  std::vector<double> Dfused(T);
  for (int t = 0; t < T; ++t) Dfused[t] = row_dot(p.dout, t, y, t);
  out.vec("D = dout_t . out_t", Dfused);
  agree(out, "D vs rowsum(P*dP)", Dfused, D);
  std::vector<double> fq, fk, fv;
  backward_fused(p, fq, fk, fv);
  agree(out, "dq of the fused kernel vs attention_backward", fq, kq);
  agree(out, "dk of the fused kernel vs attention_backward", fk, kk);
  agree(out, "dv of the fused kernel vs attention_backward", fv, kv);
  fd_check(out, p, kq, kk, kv);
}

}  // namespace

// `--break no_rescale`: the tile crossing of the example with the rescale left out; the compare
// with attention_forward_fast, the same compare a golden fixture makes, fails.
void run_attention_broken(Printer& out, uint64_t seed, const std::string& /*bug: no_rescale*/) {
  out.title("attention --break no_rescale: the online softmax without its rescale");
  out.line("(the tile walk of `reftrain explain attention`, with rho taken as 1: the first");
  out.line(" tile's l and acc stay relative to the old max when the second tile raises it)");
  tile_crossing(out, seed, false);
  out.line("  the compare with the kernel fails: without rho, l and acc mix terms taken");
  out.line("  relative to two maxima, so out and lse are wrong wherever the max moves.");
}

void add_attention(std::vector<Explainer>& v) {
  v.push_back({"attention",
               "causal softmax(q k^T / sqrt(hs)) v, one head",
               "docs/kernels/05_attention.md",
               run_attention,
               {"no_rescale"},
               run_attention_broken});
  v.push_back({"attention_backward", "dP, softmax Jacobian dS, dq, dk, dv",
               "docs/kernels/10_attention_backward.md", run_attention_backward});
}

}  // namespace reftrain::explain
