// explain: the global gradient norm and clip, AdamW with its fused fp16 mirror, and AdamW on
// 8-bit state (docs/kernels/12_optimizer.md). The optimizer has no backward, so these
// explainers end without a finite-difference check; instead they compute every step in double
// and show that the real kernels (optim/adamw.h, optim/adamw8bit.h) agree.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"

namespace reftrain::explain {

namespace {

const char kPage[] = "docs/kernels/12_optimizer.md";

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  std::string s = buf;
  // A value that rounds to zero prints without a sign: no "-0.000000".
  const size_t minus = s.find('-');
  if (minus != std::string::npos && s.find_first_of("123456789") == std::string::npos &&
      s.find('e') == std::string::npos) {
    s[minus] = ' ';
  }
  return s;
}

std::string hex(uint32_t u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, " 0x%08x", u);
  return buf;
}

// "  name      = v0 v1 ...", the name padded so that the columns of every row line up; at most
// per_line values a line.
void row(Printer& out, const std::string& name, const std::vector<std::string>& items,
         size_t per_line = 8) {
  std::string head = "  " + name;
  head.resize(std::max<size_t>(head.size(), 12), ' ');
  head += " =";
  std::string line = head;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && i % per_line == 0) {
      out.line(line);
      line = std::string(head.size(), ' ');
    }
    line += items[i];
  }
  out.line(line);
}

void row(Printer& out, const std::string& name, const std::vector<double>& v,
         const char* f = "%11.6f", size_t per_line = 8) {
  std::vector<std::string> items;
  for (double x : v) items.push_back(fmt(f, x));
  row(out, name, items, per_line);
}

void irow(Printer& out, const std::string& name, const std::vector<int>& v, size_t per_line) {
  std::vector<std::string> items;
  for (int x : v) items.push_back(fmt("%11.0f", x));
  row(out, name, items, per_line);
}

void value(Printer& out, const std::string& name, double v, const char* f,
           const std::string& note = "") {
  std::string head = "  " + name;
  head.resize(std::max<size_t>(head.size(), 12), ' ');
  out.line(head + " = " + fmt(f, v) + (note.empty() ? "" : "   " + note));
}

std::vector<double> widen(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<float> narrow(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

std::string agree(const std::vector<double>& a, const std::vector<float>& b) {
  const double d = max_abs_diff(a, widen(b));
  return d < 1e-9 ? "< 1e-9" : fmt("%.1e", d);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

const char* yes(bool b) {
  return b ? "yes" : "NO";
}

// ---------------------------------------------------------------------------------------------
// reduce_norm_sq and finalize_grad_stats on six gradients, one of them NaN.

// The six gradients both explainers start from (the same seed gives the same numbers).
std::vector<float> six_gradients(Printer& out, uint64_t seed) {
  Inputs in(seed);
  std::vector<double> gd = in.uniform(6, -1.5, 1.5);
  gd[2] = std::numeric_limits<double>::quiet_NaN();
  const std::vector<float> g = narrow(gd);
  out.section("inputs: the whole gradient mega-buffer (here six numbers; g[2] is NaN)");
  row(out, "g", widen(g), "%10.4f");
  return g;
}

void run_reduce_norm_sq(Printer& out, uint64_t seed) {
  out.title("reduce_norm_sq: sum of the squares of the finite gradients   (n=6)");
  const std::vector<float> g = six_gradients(out, seed);
  const size_t n = g.size();

  out.section("square every finite g, add in double");
  std::vector<double> sq(n);
  double norm_sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    sq[i] = std::isfinite(g[i]) ? double(g[i]) * double(g[i]) : 0.0;
    norm_sq += sq[i];
  }
  row(out, "g^2", sq, "%10.4f");
  out.line("  g[2] is not finite: it adds nothing (and AdamW will treat it as 0)");
  value(out, "norm_sq", norm_sq, "%.9f", "sum of the row above");
  const double ref = reduce_norm_sq(g.data(), n);
  const double fast = reduce_norm_sq_fast(g.data(), n);
  value(out, "reference", ref, "%.9f", "64 fixed chunks, then the chunk sums in order");
  value(out, "fast", fast, "%.9f", std::string("same bits as the reference: ") + yes(ref == fast));
  out.line("");
  out.line("The optimizer has no backward pass, so no finite-difference check.");
}

void run_finalize_grad_stats(Printer& out, uint64_t seed) {
  out.title("finalize_grad_stats: gradient norm and clip factor   (n=6, max_norm=1)");
  const std::vector<float> g = six_gradients(out, seed);
  const size_t n = g.size();
  const double norm_sq = reduce_norm_sq(g.data(), n);
  value(out, "norm_sq", norm_sq, "%.9f", "reduce_norm_sq (explained there)");

  out.section("the norm and the clip factor");
  const double norm = std::sqrt(norm_sq);
  const double clip = std::min(1.0, 1.0 / std::max(norm, 1e-6));
  value(out, "grad_norm", norm, "%.6f", "sqrt(norm_sq)");
  value(out, "clip", clip, "%.6f", "min(1, max_norm / max(grad_norm, 1e-6))");
  const GradStats stats = finalize_grad_stats(norm_sq, 1.0f);
  value(out, "float norm", stats.grad_norm, "%.6f", "grad_norm from finalize_grad_stats");
  value(out, "float clip", stats.clip, "%.6f", "clip from finalize_grad_stats");
  value(out, "max_norm 5", finalize_grad_stats(norm_sq, 5.0f).clip, "%.6f",
        "norm below max_norm: clip = 1, nothing changes");
  value(out, "max_norm 0", finalize_grad_stats(norm_sq, 0.0f).clip, "%.6f", "clipping off");

  out.section("what AdamW receives: g' = isfinite(g) ? g*clip : 0");
  std::vector<double> gc(n);
  double norm_c = 0.0;
  for (size_t i = 0; i < n; ++i) {
    gc[i] = std::isfinite(g[i]) ? double(g[i] * stats.clip) : 0.0;
    norm_c += gc[i] * gc[i];
  }
  row(out, "g'", gc, "%10.4f");
  value(out, "|g'|", std::sqrt(norm_c), "%.6f", "= max_norm: the clipped length");
  out.line("");
  out.line("The optimizer has no backward pass, so no finite-difference check.");
}

// ---------------------------------------------------------------------------------------------
// adamw_update: two steps on five weights, step by step in double and by the real kernels in float.

struct Hyper {
  double lr = 0.1, beta1 = 0.9, beta2 = 0.99, eps = 1e-8, wd = 0.1;
};

void run_adamw_update(Printer& out, uint64_t seed) {
  const int n = 5;
  const Hyper h;
  const AdamWHyper hp{float(h.lr), float(h.beta1), float(h.beta2), float(h.eps), float(h.wd)};
  Inputs in(seed);
  const std::vector<float> w0 = narrow(in.uniform(n, -1, 1));
  std::vector<std::vector<float>> grads = {narrow(in.uniform(n, -1, 1)),
                                           narrow(in.uniform(n, -1, 1))};
  grads[0][3] = std::numeric_limits<float>::infinity();

  out.title("adamw_update: two AdamW steps on five weights, in double and in float");
  out.section("inputs");
  out.line("  lr 0.1, beta1 0.9, beta2 0.99, eps 1e-8, wd 0.1 (the wd range), max_norm 1");
  out.line("  m = v = 0 before step 1 (zero-initialised state)");
  row(out, "w", widen(w0));

  // The double walk-through starts from the float inputs, so the only differences from the
  // kernels are the kernels' float roundings.
  std::vector<double> w = widen(w0), m(n, 0.0), v(n, 0.0);
  std::vector<float> wf = w0, mf(n, 0.0f), vf(n, 0.0f);
  std::vector<float> wh = w0, mh(n, 0.0f), vh(n, 0.0f);  // the copy adamw_update_f16 runs on
  std::vector<f16> w16(n);
  for (int t = 1; t <= 2; ++t) {
    const std::vector<float>& g = grads[size_t(t - 1)];
    out.section("step t=" + std::to_string(t));
    row(out, "g", widen(g));
    const GradStats stats = finalize_grad_stats(reduce_norm_sq_fast(g.data(), n), 1.0f);
    value(out, "grad_norm", stats.grad_norm, "%.6f", "over finite g (finalize_grad_stats)");
    value(out, "clip", stats.clip, "%.6f");
    const double b1t = std::pow(h.beta1, t), b2t = std::pow(h.beta2, t);
    const double b1c = 1.0 / std::max(1.0 - b1t, 1e-12), b2c = 1.0 / std::max(1.0 - b2t, 1e-12);
    value(out, "beta1^t", b1t, "%.6f", "b1_corr = 1/max(1 - beta1^t, 1e-12) = " + fmt("%.6f", b1c));
    value(out, "beta2^t", b2t, "%.6f", "b2_corr = 1/max(1 - beta2^t, 1e-12) = " + fmt("%.6f", b2c));
    std::vector<double> gp(n), mhat(n), vhat(n), upd(n), decay(n);
    for (int i = 0; i < n; ++i) {
      gp[i] = std::isfinite(g[i]) ? double(g[i]) * stats.clip : 0.0;
      m[i] = h.beta1 * m[i] + (1 - h.beta1) * gp[i];
      v[i] = h.beta2 * v[i] + (1 - h.beta2) * gp[i] * gp[i];
      mhat[i] = m[i] * b1c;
      vhat[i] = v[i] * b2c;
      upd[i] = mhat[i] / (std::sqrt(vhat[i]) + h.eps);
      decay[i] = h.wd * w[i];
    }
    row(out, "g'", gp);
    row(out, "m", m);
    row(out, "v", v);
    row(out, "m_hat", mhat);
    row(out, "v_hat", vhat);
    row(out, "update", upd);
    row(out, "decay", decay);
    for (int i = 0; i < n; ++i) w[i] -= h.lr * (upd[i] + decay[i]);
    row(out, "w_new", w);
    if (t == 1) {
      out.line("  at t=1, m_hat = g' and v_hat = g'^2: every update is +-1 (0 where g' = 0),");
      out.line("  so the first step moves each weight by lr, whatever its gradient's size.");
      out.line("  g[3] is inf: g' = 0 there, so only the decay moves w[3].");
    }

    out.line("  the kernels, in float:");
    std::vector<float> gf = g, gh = g;
    adamw_update(wf.data(), gf.data(), mf.data(), vf.data(), n, stats, hp, t);
    adamw_update_f16(wh.data(), gh.data(), mh.data(), vh.data(), w16.data(), n, stats, hp, t);
    row(out, "w_new (f32)", widen(wf));
    out.line("  adamw_update vs the double steps: |w| " + agree(w, wf) + ", |m| " + agree(m, mf) +
             ", |v| " + agree(v, vf));
    row(out, "g after", widen(gf));
    std::vector<double> mirror(n), err(n);
    for (int i = 0; i < n; ++i) {
      mirror[i] = double(float(w16[i]));
      err[i] = double(wh[i]) - mirror[i];
    }
    row(out, "w16", mirror);
    row(out, "w - w16", err);
    out.line(std::string("  adamw_update_f16: same w, m, v bits as adamw_update: ") +
             yes(same_bits(wh, wf) && same_bits(mh, mf) && same_bits(vh, vf)));
  }
  out.line("");
  out.line("The optimizer has no backward pass, so no finite-difference check.");
}

// ---------------------------------------------------------------------------------------------
// adamw_8bit_update: one block of eight elements, dequantize, update, requantize.

std::vector<int> m_codes(const std::vector<uint8_t>& c) {
  std::vector<int> r;
  for (uint8_t b : c) r.push_back(int(int8_t(b)));
  return r;
}

std::vector<int> v_codes(const std::vector<uint8_t>& c) {
  return std::vector<int>(c.begin(), c.end());
}

std::vector<uint32_t> pack(const std::vector<uint8_t>& c) {
  std::vector<uint32_t> words(quant_words(c.size()), 0);
  for (size_t i = 0; i < c.size(); ++i) words[i / 4] |= uint32_t(c[i]) << (8 * (i % 4));
  return words;
}

void words_row(Printer& out, const std::string& name, const std::vector<uint32_t>& words) {
  std::vector<std::string> items;
  for (uint32_t u : words) items.push_back(hex(u));
  row(out, name, items, 4);
}

// The 8-bit example's block: weights, this step's gradient, and the state the previous step left
// before it was quantized.
struct Block8 {
  std::vector<float> w0, g0, m_prev, v_prev;
};

Block8 block8(uint64_t seed, size_t n) {
  Inputs in(seed);
  Block8 b;
  b.w0 = narrow(in.uniform(n, -1, 1));
  // Small gradients, except one outlier (element 2) that sets this step's block scales.
  b.g0.resize(n), b.m_prev.resize(n), b.v_prev.resize(n);
  const std::vector<double> gu = in.uniform(n, -1, 1), mu = in.uniform(n, -1, 1),
                            su = in.uniform(n, 0.2, 2.0);
  for (size_t i = 0; i < n; ++i) {
    b.g0[i] = float(0.05 * gu[i]);
    // The state the previous step left, before it was quantized: m ~ 0.01, v ~ 1e-6..4e-4.
    b.m_prev[i] = float(0.01 * mu[i]);
    b.v_prev[i] = float(0.0001 * su[i] * su[i]);
  }
  b.g0[2] = 2.0f;
  // Element 6 has had almost no gradient: a tiny v, a little momentum left, none this step.
  b.m_prev[6] = 0.0005f, b.v_prev[6] = 1e-8f, b.g0[6] = 0.0f;
  return b;
}

// `--break exact_v`: the update reads the previous step's v as it was before quantization where
// the dequantized v_deq belongs (the state a checkpoint or another backend holds is the codes,
// not that v). The result is no longer adamw_8bit_update's, and the compare says so.
void run_adamw_8bit_broken(Printer& out, uint64_t seed, const std::string& /*bug: exact_v*/) {
  const size_t n = 8;
  const int t = 10;
  const AdamWHyper hp{0.01f, 0.9f, 0.99f, 1e-8f, 0.1f};
  const Block8 b = block8(seed, n);
  out.title("adamw_8bit_update --break exact_v: the unquantized v where v_deq belongs");
  out.line("(the block of `explain adamw_8bit_update`; the update reads v before its");
  out.line(" quantization instead of v_deq = (code*scale)^2, the state the codes hold)");
  std::vector<uint8_t> mc(n), vc(n);
  float ms = 0.0f, vs = 0.0f;
  quantize_m(b.m_prev.data(), n, mc.data(), &ms);
  quantize_v(b.v_prev.data(), n, vc.data(), &vs);
  std::vector<float> m(n), v_deq(n);
  dequantize_m(mc.data(), ms, n, m.data());
  dequantize_v(vc.data(), vs, n, v_deq.data());
  out.section("the v the update reads");
  row(out, "v_deq", widen(v_deq), "%11.3e", 4);
  row(out, "v (bug)", widen(b.v_prev), "%11.3e", 4);
  const GradStats stats = finalize_grad_stats(reduce_norm_sq_fast(b.g0.data(), n), 1.0f);
  std::vector<float> w = b.w0, g = b.g0, v = b.v_prev;
  adamw_update(w.data(), g.data(), m.data(), v.data(), n, stats, hp, t);
  std::vector<float> wk = b.w0, gk = b.g0;
  std::vector<uint32_t> mp = pack(mc), vp = pack(vc);
  float msk = ms, vsk = vs;
  adamw_8bit_update(wk.data(), gk.data(), mp.data(), vp.data(), &msk, &vsk, n, stats, hp, t);
  out.section("the new w, and the kernel's");
  row(out, "w (bug)", widen(w), "%11.6f", 4);
  row(out, "w (kernel)", widen(wk), "%11.6f", 4);
  out.line(std::string("  w bits as the kernel's: ") + yes(same_bits(wk, w)));
  out.line(same_bits(wk, w)
               ? "  the same here: every v happened to quantize exactly"
               : "  DIFFERENT: small errors (element 6's is the largest), and a golden");
  out.line("  compare of the step catches them all the same.");
}

void run_adamw_8bit_update(Printer& out, uint64_t seed) {
  const size_t n = 8;
  const int t = 10;
  const AdamWHyper hp{0.01f, 0.9f, 0.99f, 1e-8f, 0.1f};
  const Block8 b = block8(seed, n);
  const std::vector<float>& w0 = b.w0;
  const std::vector<float>& g0 = b.g0;
  const std::vector<float>& m_prev = b.m_prev;
  const std::vector<float>& v_prev = b.v_prev;

  out.title("adamw_8bit_update: one block of 8-bit m and v: dequantize, update, requantize");
  out.section("inputs (one block of 8; a real block holds 256)");
  out.line("  t = 10, lr 0.01, beta1 0.9, beta2 0.99, eps 1e-8, wd 0.1, max_norm 1");
  row(out, "w", widen(w0), "%11.6f", 4);
  row(out, "g", widen(g0), "%11.6f", 4);
  std::vector<uint8_t> mc(n), vc(n);
  float ms = 0.0f, vs = 0.0f;
  quantize_m(m_prev.data(), n, mc.data(), &ms);
  quantize_v(v_prev.data(), n, vc.data(), &vs);
  out.line("  the state as the previous step stored it: codes, 4 to a uint32, one scale each");
  irow(out, "m codes", m_codes(mc), 4);
  value(out, "m scale", ms, "%.6e");
  irow(out, "v codes", v_codes(vc), 4);
  value(out, "v scale", vs, "%.6e");
  const std::vector<uint32_t> m_packed0 = pack(mc), v_packed0 = pack(vc);
  words_row(out, "m_packed", m_packed0);
  words_row(out, "v_packed", v_packed0);
  out.line("  element 4i+j is byte j of word i, low byte first; m's byte is the int8 code");

  out.section("dequantize: m = code*scale, v = (code*scale)^2");
  std::vector<float> m(n), v(n);
  dequantize_m(mc.data(), ms, n, m.data());
  dequantize_v(vc.data(), vs, n, v.data());
  row(out, "m", widen(m), "%11.6f", 4);
  row(out, "v", widen(v), "%11.3e", 4);

  out.section("update: exactly adamw_update's float steps (`reftrain explain adamw_update`)");
  const GradStats stats = finalize_grad_stats(reduce_norm_sq_fast(g0.data(), n), 1.0f);
  value(out, "grad_norm", stats.grad_norm, "%.6f");
  value(out, "clip", stats.clip, "%.6f");
  std::vector<float> w = w0, g = g0;
  adamw_update(w.data(), g.data(), m.data(), v.data(), n, stats, hp, t);
  row(out, "m (fp32)", widen(m), "%11.6f", 4);
  row(out, "v (fp32)", widen(v), "%11.3e", 4);
  row(out, "w", widen(w), "%11.6f", 4);
  out.line("  the step used the fresh fp32 m and v; rounding them reaches w next step");

  out.section("requantize m: scale = absmax/127, code = nearest(m/scale)");
  float absmax = 0.0f;
  for (float x : m) absmax = std::max(absmax, std::abs(x));
  value(out, "absmax", absmax, "%.6f");
  std::vector<uint8_t> mc1(n), vc1(n);
  float ms1 = 0.0f, vs1 = 0.0f;
  quantize_m(m.data(), n, mc1.data(), &ms1);
  value(out, "scale", ms1, "%.6e");
  std::vector<double> q(n), back(n);
  for (size_t i = 0; i < n; ++i) q[i] = double(m[i]) / double(ms1);
  row(out, "m/scale", q, "%11.3f", 4);
  irow(out, "code", m_codes(mc1), 4);
  for (size_t i = 0; i < n; ++i) back[i] = double(float(int8_t(mc1[i])) * ms1) - double(m[i]);
  row(out, "error", back, "%11.6f", 4);
  out.line("  |error| <= scale/2 = " + fmt("%.6f", ms1 / 2.0));
  out.line("  the outlier sets absmax: the small momenta keep only a few levels");

  out.section("requantize v: s = sqrt(vmax)/255, code = nearest(sqrt(v)/s) in 1..255");
  const double mhat6 = double(m[6]) / (1.0 - std::pow(double(hp.beta1), t));
  float vmax = 0.0f;
  for (float x : v) vmax = std::max(vmax, x);
  value(out, "vmax", vmax, "%.6e");
  quantize_v(v.data(), n, vc1.data(), &vs1);
  value(out, "s", vs1, "%.6e");
  for (size_t i = 0; i < n; ++i) q[i] = double(std::sqrt(v[i]) / vs1);
  row(out, "sqrt(v)/s", q, "%11.3f", 4);
  irow(out, "code", v_codes(vc1), 4);
  std::vector<float> vq(n);
  dequantize_v(vc1.data(), vs1, n, vq.data());
  row(out, "v_deq", widen(vq), "%11.3e", 4);
  const std::string big = fmt("%.0f", mhat6 / 1e-8);
  out.line("  element 6: sqrt(v)/s = " + fmt("%.3f", q[6]) +
           " rounds to 0, but a positive v keeps code 1");
  out.line("  (v_deq >= 4v, never 0). A linear code v/(vmax/255) = " +
           fmt("%.4f", double(v[6]) / (vmax / 255.0)) + " would store 0:");
  out.line("  element 6's next update would be about m_hat/eps = " + big + " (a step of " + big +
           "*lr).");
  const std::vector<uint32_t> m_packed1 = pack(mc1), v_packed1 = pack(vc1);
  words_row(out, "m_packed", m_packed1);
  words_row(out, "v_packed", v_packed1);

  out.section("the kernel: adamw_8bit_update on the packed state");
  std::vector<float> wk = w0, gk = g0;
  std::vector<uint32_t> mp = m_packed0, vp = v_packed0;
  float msk = ms, vsk = vs;
  adamw_8bit_update(wk.data(), gk.data(), mp.data(), vp.data(), &msk, &vsk, n, stats, hp, t);
  out.line(std::string("  w bits as above: ") + yes(same_bits(wk, w)) +
           "; codes and scales as above: " +
           yes(mp == m_packed1 && vp == v_packed1 && msk == ms1 && vsk == vs1));
  std::vector<float> wx = w0, gx = g0;
  mp = m_packed0, vp = v_packed0, msk = ms, vsk = vs;
  adamw_8bit_update_fast(wx.data(), gx.data(), mp.data(), vp.data(), &msk, &vsk, n, stats, hp, t);
  out.line(std::string("  adamw_8bit_update_fast: the same bytes: ") +
           yes(same_bits(wx, w) && mp == m_packed1 && vp == v_packed1 && msk == ms1 && vsk == vs1));
  row(out, "g after", widen(gk), "%11.6f", 4);
  out.line("  state: 2 bytes + 8/256 bytes per weight instead of 8 (m and v in fp32)");
  out.line("");
  out.line("The optimizer has no backward pass, so no finite-difference check.");
}

}  // namespace

void add_optimizer(std::vector<Explainer>& v) {
  v.push_back(
      {"reduce_norm_sq", "sum of squares of the finite gradients", kPage, run_reduce_norm_sq});
  v.push_back({"finalize_grad_stats", "global gradient norm and clip factor", kPage,
               run_finalize_grad_stats});
  v.push_back({"adamw_update", "AdamW step, bias correction, wd, fused f16 mirror", kPage,
               run_adamw_update});
  v.push_back({"adamw_8bit_update",
               "AdamW on 8-bit m, v: dequantize, update, requantize",
               kPage,
               run_adamw_8bit_update,
               {"exact_v"},
               run_adamw_8bit_broken});
}

}  // namespace reftrain::explain
