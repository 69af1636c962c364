// The exercises the program checks (`reftrain explain NAME --exercise N`, `--check N ANSWER`,
// `--answer N`). Each one prints its data from the seed and computes its answer with the kernel
// of its page (or, where the page is about a formula, that formula in double), so the program,
// not the page, is the judge. The pages show exercise 1 of each kernel verbatim (tested).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "apps/explain/svg.h"
#include "core/tokenizer/bpe_train.h"
#include "ops/activation.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/embed.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "optim/adamw.h"

namespace reftrain::explain {

namespace {

std::string fmtf2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// "[0.12, -0.50]": the seed's 2-decimal inputs as a student types them.
std::string list(const Vec& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + fmtf2(v[i]);
  return s + "]";
}

// The closing lines every exercise prints: how to check it.
std::string how(const std::string& name, int n, const std::string& rounding) {
  return "\n\nAnswer " + rounding + "; check it (add the --seed, if you gave one):\n" +
         "  reftrain explain " + name + " --check " + std::to_string(n) + " ANSWER\n";
}

// `text` laid out for an 80-column terminal: the lines of a paragraph (lines that do not start
// with a space) are joined and broken again at spaces before column 80; indented lines (data
// rows, commands) and blank lines stay as they are. So an exercise's text can be written without
// caring where its data makes a line end.
std::string wrap(const std::string& text) {
  std::vector<std::string> lines;
  for (size_t begin = 0; begin <= text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the text's final newline
  std::string out, para;
  auto flush = [&] {
    while (para.size() > 79) {
      const size_t cut = para.rfind(' ', 79);
      if (cut == std::string::npos || cut == 0) break;
      out += para.substr(0, cut) + "\n";
      para = para.substr(cut + 1);
    }
    if (!para.empty()) out += para + "\n";
    para.clear();
  };
  for (const std::string& l : lines) {
    if (l.empty() || l[0] == ' ') {
      flush();
      out += l + "\n";
    } else {
      para += (para.empty() ? "" : " ") + l;
    }
  }
  flush();
  // Every line above ends with a newline; a text that did not end with one keeps its ending.
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
  return out;
}

std::vector<Exercise> backprop(uint64_t seed) {
  Inputs in(seed);
  const Vec v = in.uniform(3, -1, 1);
  const double x = v[0], w = v[1], dout = v[2];
  const double q = w * x, dq = (1 - std::tanh(q) * std::tanh(q)) * dout;
  std::vector<Exercise> out;
  out.push_back(
      {"Exercise 1 (backprop). The graph of the page, q = w*x, out = tanh(q) + x,\n"
       "L = dout*out, with x = " +
           fmtf2(x) + ", w = " + fmtf2(w) + ", dout = " + fmtf2(dout) +
           ".\nCompute dw = dL/dw by the chain rule." + how("backprop", 1, "to 4 decimals"),
       x * dq, 5e-5});
  out.push_back(
      {"Exercise 2 (backprop, break it). Same data. Compute the dx a backward gets\n"
       "when it writes dx = w*dq instead of adding it (dx += w*dq) after the skip\n"
       "path's 1*dout: the value the wrong code leaves, which the finite difference\n"
       "(the page's check) then disagrees with." +
           how("backprop", 2, "to 4 decimals"),
       w * dq, 5e-5});
  return out;
}

std::vector<Exercise> embed(uint64_t seed) {
  Inputs in(seed);
  const int V = 4, C = 2, T = 5;
  const std::vector<int> tok = in.tokens(T, V);
  const Vec dout = in.uniform(size_t(T) * C, -1, 1);
  std::vector<int32_t> t32(tok.begin(), tok.end());
  Vec dwte(size_t(V) * C, 0.0), dwpe(size_t(T) * C, 0.0);
  embed_backward(dwte.data(), dwpe.data(), dout.data(), t32.data(), 1, T, C);
  std::string toks;
  for (int t : tok) toks += (toks.empty() ? "" : ", ") + std::to_string(t);
  std::string rows;
  for (int t = 0; t < T; ++t) {
    rows += "  dx[" + std::to_string(t) +
            "] = " + list({dout[size_t(t) * C], dout[size_t(t) * C + 1]}) + "\n";
  }
  const int v0 = tok[0];
  return {{"Exercise 1 (embed). B = 1, T = 5, C = 2, V = 4, tokens [" + toks +
               "],\nthe gradient arriving at x:\n" + rows + "Compute dwte[" + std::to_string(v0) +
               "][0] (the embedding backward, dwte starting at 0)." +
               how("embed", 1, "to 2 decimals"),
           dwte[size_t(v0) * C], 5e-3}};
}

std::vector<Exercise> layernorm(uint64_t seed) {
  Inputs in(seed);
  const int C = 4;
  const Vec x = in.uniform(C, -2, 2);
  const Vec w(C, 1.0), b(C, 0.0);
  Vec out(C), mean(1), rstd(1);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 1, C);
  return {{"Exercise 1 (layernorm). One row x = " + list(x) +
               ", w = 1, b = 0, eps = 1e-5.\n"
               "Compute rstd = 1/sqrt(var + eps), var the biased variance (divide by C)." +
               how("layernorm", 1, "to 4 decimals"),
           rstd[0], 5e-5},
          {"Exercise 2 (layernorm). Same row. Compute out[0] = (x[0] - mean)*rstd." +
               how("layernorm", 2, "to 4 decimals"),
           out[0], 5e-5}};
}

std::vector<Exercise> rmsnorm(uint64_t seed) {
  Inputs in(seed);
  const int C = 4;
  const Vec x = in.uniform(C, -2, 2);
  const Vec w(C, 1.0);
  Vec out(C), rstd(1);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, C);
  return {{"Exercise 1 (rmsnorm). One row x = " + list(x) +
               ", w = 1, eps = 1e-5.\n"
               "Compute out[0] = x[0]*rstd, rstd = 1/sqrt(mean(x^2) + eps)." +
               how("rmsnorm", 1, "to 4 decimals"),
           out[0], 5e-5}};
}

std::vector<Exercise> linear(uint64_t seed) {
  Inputs in(seed);
  const int N = 1, K = 3, O = 2;
  const Vec inp = in.uniform(size_t(N) * K, -1, 1), w = in.uniform(size_t(O) * K, -1, 1),
            b = in.uniform(O, -1, 1);
  Vec out(size_t(N) * O);
  linear_forward(teaching_matmul(), out.data(), inp.data(), w.data(), b.data(), N, K, O);
  return {{"Exercise 1 (linear). inp = " + list(inp) + " (N = 1, K = 3),\nw[0] = " +
               list(matrix_row(w, 0, K)) + ", w[1] = " + list(matrix_row(w, 1, K)) +
               " (nn.Linear layout [O,K]),\nb = " + list(b) + ". Compute out[0][1]." +
               how("linear", 1, "to 4 decimals"),
           out[1], 5e-5}};
}

std::vector<Exercise> linear_backward(uint64_t seed) {
  Inputs in(seed);
  const int N = 3, K = 2, O = 2;
  const Vec inp = in.uniform(size_t(N) * K, -1, 1), w = in.uniform(size_t(O) * K, -1, 1),
            dout = in.uniform(size_t(N) * O, -1, 1);
  Vec dinp(size_t(N) * K, 0.0), dw(size_t(O) * K, 0.0), db(O, 0.0);
  linear_backward(teaching_matmul(), dinp.data(), dw.data(), db.data(), dout.data(), inp.data(),
                  w.data(), N, K, O);
  std::string rows;
  for (int r = 0; r < N; ++r) {
    rows += "  inp[" + std::to_string(r) + "] = " + list(matrix_row(inp, r, K)) + "   dout[" +
            std::to_string(r) + "] = " + list(matrix_row(dout, r, O)) + "\n";
  }
  return {{"Exercise 1 (linear_backward). N = 3 rows, K = 2, O = 2:\n" + rows +
               "Compute dw[1][0] (= sum over r of dout[r][1]*inp[r][0])." +
               how("linear_backward", 1, "to 4 decimals"),
           dw[size_t(1) * K + 0], 5e-5},
          {"Exercise 2 (linear_backward). Same data. Compute db[0]." +
               how("linear_backward", 2, "to 2 decimals"),
           db[0], 5e-3}};
}

std::vector<Exercise> rope(uint64_t seed) {
  Inputs in(seed);
  const int hs = 4, T = 4;
  const Vec pair = in.uniform(2, -1, 1);
  Vec x(size_t(T) * hs, 0.0), out(x.size());
  // Position 3, pair i = 1: channels 1 and 3 (rotate_half pairs i and i + hs/2).
  x[size_t(3) * hs + 1] = pair[0];
  x[size_t(3) * hs + 3] = pair[1];
  rope_forward(out.data(), x.data(), 1, T, 1, hs, 100.0);
  return {
      {"Exercise 1 (rope). hs = 4, theta = 100. At position t = 3 the pair i = 1 holds\n"
       "(x[1], x[3]) = (" +
           fmtf2(pair[0]) + ", " + fmtf2(pair[1]) +
           "). Compute the rotated out[1] =\nx[1]*cos(a) - x[3]*sin(a), a = t*theta^(-2i/hs)." +
           how("rope", 1, "to 4 decimals"),
       out[size_t(3) * hs + 1], 5e-5}};
}

std::vector<Exercise> attention(uint64_t seed) {
  Inputs in(seed);
  const Vec s = in.uniform(4, -2, 2);
  double m = -1e300, l = 0;
  for (double v : s) m = std::max(m, v);
  for (double v : s) l += std::exp(v - m);
  const double m2 = std::max(s[0], s[1]);
  const double l2 = std::exp(s[0] - m2) + std::exp(s[1] - m2);
  return {{"Exercise 1 (attention). Row t = 3 has the scaled scores s = " + list(s) +
               "\nfor keys u = 0..3. Compute its logsumexp lse = mx + log l (mx the max, l the\n"
               "sum of exp(s - mx)): what the fused kernel keeps of the row." +
               how("attention", 1, "to 4 decimals"),
           m + std::log(l), 5e-5},
          {"Exercise 2 (attention, break it). Same row, taken as two key tiles {0, 1} and\n"
           "{2, 3}. After the first tile mx = max(s0, s1) and l = its sum. A kernel that\n"
           "forgets the rescale rho = exp(mx_old - mx_new) adds the second tile's terms\n"
           "(taken relative to the new max) to the old l unchanged. Compute the lse it\nreports." +
               how("attention", 2, "to 4 decimals"),
           [&] {
             const double mn = std::max(m2, std::max(s[2], s[3]));
             return mn + std::log(l2 + std::exp(s[2] - mn) + std::exp(s[3] - mn));
           }(),
           5e-5}};
}

std::vector<Exercise> attention_backward(uint64_t seed) {
  Inputs in(seed);
  const Vec s = in.uniform(3, -2, 2), dp = in.uniform(3, -1, 1);
  double m = std::max(s[0], std::max(s[1], s[2])), l = 0;
  for (double v : s) l += std::exp(v - m);
  Vec p(3);
  double D = 0;
  for (int u = 0; u < 3; ++u) {
    p[size_t(u)] = std::exp(s[size_t(u)] - m) / l;
    D += p[size_t(u)] * dp[size_t(u)];
  }
  return {{"Exercise 1 (attention_backward). One row of scores s = " + list(s) +
               " and the\ngradient at its probabilities dp = " + list(dp) +
               ". Compute ds[0] =\np[0]*(dp[0] - D), D = sum_u p[u]*dp[u], p = softmax(s)." +
               how("attention_backward", 1, "to 4 decimals"),
           p[0] * (dp[0] - D), 5e-5}};
}

std::vector<Exercise> gelu(uint64_t seed) {
  Inputs in(seed);
  const Vec x = in.uniform(1, -2, 2), one(1, 1.0);
  Vec y(1), dx(1, 0.0);
  gelu_forward(y.data(), x.data(), 1);
  gelu_backward(dx.data(), x.data(), one.data(), 1);
  return {{"Exercise 1 (gelu). x = " + fmtf2(x[0]) +
               ". Compute gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))." +
               how("gelu", 1, "to 4 decimals"),
           y[0], 5e-5},
          {"Exercise 2 (gelu). Same x. Compute gelu'(x) (the page's A + B)." +
               how("gelu", 2, "to 4 decimals"),
           dx[0], 5e-5}};
}

std::vector<Exercise> swiglu(uint64_t seed) {
  Inputs in(seed);
  const Vec g = in.uniform(1, -2, 2), u = in.uniform(1, -2, 2), d = in.uniform(1, -1, 1);
  Vec dg(1, 0.0), du(1, 0.0);
  swiglu_backward(dg.data(), du.data(), d.data(), g.data(), u.data(), 1);
  return {{"Exercise 1 (swiglu). gate = " + fmtf2(g[0]) + ", up = " + fmtf2(u[0]) +
               ", dout = " + fmtf2(d[0]) +
               ".\nCompute dgate = dout*up*silu'(gate), silu'(g) = s(1 + g(1 - s)),"
               " s = sigma(g)." +
               how("swiglu", 1, "to 4 decimals"),
           dg[0], 5e-5}};
}

std::vector<Exercise> ffn_backward(uint64_t seed) {
  Inputs in(seed);
  const Vec x = in.uniform(1, -1, 1), wg = in.uniform(1, -1, 1), wu = in.uniform(1, -1, 1),
            dy = in.uniform(1, -1, 1);
  // C = F = 1 and no output projection: out = silu(wg*x)*(wu*x), the two paths of x.
  const Vec gate{wg[0] * x[0]}, up{wu[0] * x[0]};
  Vec dg(1, 0.0), du(1, 0.0);
  swiglu_backward(dg.data(), du.data(), dy.data(), gate.data(), up.data(), 1);
  return {
      {"Exercise 1 (ffn_backward). C = F = 1: gate = Wgate*x, up = Wup*x,\n"
       "out = silu(gate)*up, with x = " +
           fmtf2(x[0]) + ", Wgate = " + fmtf2(wg[0]) + ", Wup = " + fmtf2(wu[0]) +
           ", dout = " + fmtf2(dy[0]) + ".\nCompute dx, both paths of x added." +
           how("ffn_backward", 1, "to 4 decimals"),
       dg[0] * wg[0] + du[0] * wu[0], 5e-5}};
}

std::vector<Exercise> crossentropy(uint64_t seed) {
  Inputs in(seed);
  const int V = 4;
  const Vec x = in.uniform(V, -2, 2);
  const int32_t y = 1;
  Vec loss(1), d(V);
  crossentropy_forward_backward(loss.data(), d.data(), x.data(), &y, 1, V, V, 1.0, 0.0);
  return {{"Exercise 1 (crossentropy). One row of logits x = " + list(x) +
               ", target y = 1,\nno z-loss. Compute the loss -log softmax(x)[y]." +
               how("crossentropy", 1, "to 4 decimals"),
           loss[0], 5e-5},
          {"Exercise 2 (crossentropy). Same row, N = 1. Compute dlogits[1] = p[1] - 1." +
               how("crossentropy", 2, "to 4 decimals"),
           d[1], 5e-5}};
}

std::vector<Exercise> cast(uint64_t seed) {
  Inputs in(seed);
  const Vec v = in.uniform(1, 1, 100);
  const float x = float(v[0] + 0.001);
  const double h = double(f16_bits_to_f32(f32_to_f16_bits(x)));
  return {{"Exercise 1 (cast). Round x = " + fmtf("%.3f", double(x)) +
               " (a float) to f16, round to nearest even:\n10 mantissa bits, so between 2^e and "
               "2^(e+1) the f16 values are 2^(e-10) apart.\nGive the f16 value." +
               how("cast", 1, "exactly (it has at most 10 significant bits)"),
           h, 1e-9}};
}

// Four bf16 pairs chosen so that the two orders differ and a student can follow each rounding:
// 512·512 = 2^18 where floats are 2^-5 apart, and the small products are odd multiples of 2^-8,
// so the sequential chain rounds the first away (never a tie) and the canonical one, whose even
// chain cancels the big pair before the odd chain meets it, keeps it.
struct Bf16Pairs {
  std::vector<bf16> x, w;
  std::string text;  // the data as the exercise prints it
};

Bf16Pairs bf16_pairs(uint64_t seed) {
  Inputs in(seed);
  const std::vector<int> t = in.tokens(4, 16);
  const double m1 = 2 * (t[0] % 8) + 1, n1 = 2 * (t[1] % 8) + 1;  // odd, 1..15
  const double m2 = 2 * t[2] - 15, n2 = 2 * t[3] - 15;            // odd, -15..15
  const std::vector<double> x = {512, m1 / 16, -512, m2 / 16}, w = {512, n1 / 16, 512, n2 / 16};
  Bf16Pairs p;
  auto row = [&](const char* name, const std::vector<double>& v, std::vector<bf16>& out) {
    p.text += std::string("  ") + name + " = [";
    for (size_t k = 0; k < v.size(); ++k) {
      out.push_back(f32_to_bf16(float(v[k])));
      p.text += (k ? ", " : "") + fmtf("%g", v[k]);
    }
    p.text += "]\n";
  };
  row("x", x, p.x);
  row("w", w, p.w);
  return p;
}

std::vector<Exercise> bf16_dot(uint64_t seed) {
  const Bf16Pairs p = bf16_pairs(seed);
  const float canonical = dot_bf16_canonical(0.0f, p.x.data(), 1, p.w.data(), 1, 4);
  float sequential = 0.0f;
  for (int k = 0; k < 4; ++k) {
    sequential = fma_flush(bf16_to_f32(p.x[size_t(k)]), bf16_to_f32(p.w[size_t(k)]), sequential);
  }
  return {{"Exercise 1 (bf16_dot). K = 4 (one block of 32, padded with zeros), bf16 values:\n" +
               p.text +
               "Compute sum_k x[k]*w[k] in float in the canonical order: even = fma(x[2], w[2], "
               "fma(x[0], w[0], 0)), odd = fma(x[3], w[3], fma(x[1], w[1], 0)), then 0 + (even + "
               "odd). Each fma rounds once to float (24 significant bits)." +
               how("bf16_dot", 1, "to 6 decimals"),
           double(canonical), 1e-6},
          {"Exercise 2 (bf16_dot). Same data. Compute it in the sequential order of the fp32 "
           "matmul: one fma chain from 0 over k = 0, 1, 2, 3. Between 2^18 and 2^19 the floats "
           "are 2^-5 apart." +
               how("bf16_dot", 2, "to 6 decimals"),
           double(sequential), 1e-6}};
}

std::vector<Exercise> adamw(uint64_t seed) {
  Inputs in(seed);
  const Vec v = in.uniform(2, -1, 1);
  float w = float(v[0]), g = float(v[1]), m = 0, s = 0;
  const AdamWHyper hp{0.01f, 0.9f, 0.999f, 1e-8f, 0.1f};
  adamw_update(&w, &g, &m, &s, 1, GradStats{std::abs(g), 1.0f}, hp, 1);
  return {{"Exercise 1 (adamw_update). Step t = 1 from m = v = 0: w = " + fmtf2(v[0]) +
               ", g = " + fmtf2(v[1]) +
               ",\nlr = 0.01, beta1 0.9, beta2 0.999, eps 1e-8, wd 0.1,"
               " no clip. Compute the new w\n(decoupled decay: w -= lr*(m_hat/(sqrt(v_hat) + eps)"
               " + wd*w))." +
               how("adamw_update", 1, "to 6 decimals"),
           double(w), 5e-7}};
}

std::vector<Exercise> determinism(uint64_t seed) {
  Inputs in(seed);
  const Vec v = in.uniform(3, 0.5, 0.99);
  // Float sums, in the order the exercise names.
  const float big = 16777216.0f;
  float s = big;
  for (double x : v) s += float(x);
  return {{"Exercise 1 (determinism). In float, add left to right: 2^24 + " + fmtf2(v[0]) + " + " +
               fmtf2(v[1]) + " + " + fmtf2(v[2]) + ".\nGive the float result." +
               how("determinism", 1, "exactly"),
           double(s), 1e-9}};
}

std::vector<Exercise> bpe(uint64_t seed) {
  const std::string text = bpe_exercise_text(seed);
  const Tokenizer two = train_bpe(text, kMinTrainVocab + 2, "exercise");
  return {{"Exercise 1 (bpe). Train byte-level BPE on the text '" + text +
               "' (one chunk) with two merges: count the adjacent pairs, merge the most frequent"
               " (ties: the smaller (bytes(left), bytes(right))), count again, merge again. How "
               "many tokens is the text then?" +
               how("bpe", 1, "as a whole number"),
           double(two.encode(text).size()), 1e-9}};
}

}  // namespace

std::vector<Exercise> exercises(const std::string& name, uint64_t seed) {
  using Maker = std::vector<Exercise> (*)(uint64_t);
  static const std::vector<std::pair<std::string, Maker>> all = {
      {"backprop", backprop},
      {"embed", embed},
      {"layernorm", layernorm},
      {"rmsnorm", rmsnorm},
      {"linear", linear},
      {"linear_backward", linear_backward},
      {"rope", rope},
      {"attention", attention},
      {"attention_backward", attention_backward},
      {"gelu", gelu},
      {"swiglu", swiglu},
      {"ffn_backward", ffn_backward},
      {"crossentropy", crossentropy},
      {"cast", cast},
      {"bf16_dot", bf16_dot},
      {"adamw_update", adamw},
      {"determinism", determinism},
      {"bpe", bpe},
  };
  for (const auto& [n, make] : all) {
    if (n != name) continue;
    std::vector<Exercise> v = make(seed);
    for (Exercise& e : v) e.text = wrap(e.text);
    return v;
  }
  return {};
}

}  // namespace reftrain::explain
