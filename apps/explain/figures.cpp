// The study pages' figures, drawn from the program's own numbers: each runs the kernel its page
// is about (or the computation the page derives) on a small input and draws the result, so a
// figure cannot say something the code does not do. `reftrain explain --figures docs/img`
// rewrites them; tests/cli/test_figures.cpp holds the committed files equal to this output.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/explain/explain.h"
#include "apps/explain/svg.h"
#include "core/tokenizer/bpe_train.h"
#include "ops/activation.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/linear.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/rope.h"
#include "optim/adamw.h"

namespace reftrain::explain {

namespace {

const char* kFwd = "#e8f0fe";   // forward kernels
const char* kBwd = "#fdecea";   // backward kernels
const char* kOpt = "#e6f4ea";   // the optimizer
const char* kData = "#f3f3f3";  // data, no kernel
const char* kBlue = "#2b6cb0";
const char* kRed = "#c53030";
const char* kGreen = "#2f855a";
const char* kGray = "#666";

// Maps [lo, hi] onto [a, b] (b < a for a y axis).
struct Scale {
  double lo, hi, a, b;
  double operator()(double v) const { return a + (v - lo) / (hi - lo) * (b - a); }
};

// ---- the map: one training step of gpt2 and llama ----------------------------------------------

struct MapBox {
  std::string label, page, shape;  // page: "03" or "" (no kernel); shape: the output's shape
};

// A column of boxes linked to their pages, each followed by an arrow labelled with the shape
// that flows to the next; returns the y below the last box.
double map_column(Svg& svg, double x, double y, double w, const std::vector<MapBox>& boxes,
                  const char* fill, bool last_arrow) {
  const double h = 26, gap = 18;
  for (size_t i = 0; i < boxes.size(); ++i) {
    const MapBox& b = boxes[i];
    const std::vector<std::string> pages = {"00_backprop",
                                            "01_embed",
                                            "02_norm",
                                            "03_linear",
                                            "04_rope",
                                            "05_attention",
                                            "06_swiglu",
                                            "07_loss",
                                            "08_cast",
                                            "09_backward_ffn",
                                            "10_attention_backward",
                                            "11_linear_backward",
                                            "12_optimizer",
                                            "13_tokenizer",
                                            "14_bf16"};
    const bool linked = !b.page.empty();
    if (linked) svg.begin_link("../kernels/" + pages[size_t(std::stoi(b.page))] + ".md");
    svg.rect(x, y, w, h, b.label.rfind("data", 0) == 0 ? kData : fill, "#333", 1);
    svg.text(x + 8, y + 17, b.label, 12);
    if (linked) svg.text(x + w - 8, y + 17, b.page, 12, "end", kBlue, true);
    if (linked) svg.end_link();
    if (i + 1 < boxes.size() || last_arrow) {
      svg.arrow(x + w / 2, y + h, x + w / 2, y + h + gap - 1);
      svg.text(x + w / 2 + 8, y + h + 13, b.shape, 10.5, "start", kGray);
    }
    y += h + gap;
  }
  return y;
}

std::string map_svg() {
  Svg svg(980, 860, "One training step of gpt2 and llama: where each kernel sits");
  svg.text(490, 26, "One training step: forward, backward, optimizer", 18, "middle", "#111", true);
  svg.text(490, 46,
           "gpt2 | llama where they differ; the number is the study page (click a box); shapes "
           "use B, T, C, F, Vp",
           11.5, "middle", kGray);
  // Forward: the data, the embedding, then the residual stream with its two branches per layer.
  const double fx = 110, fw = 330;
  svg.text(fx + fw / 2, 74, "forward", 14, "middle", kBlue, true);
  double y =
      map_column(svg, fx, 84, fw,
                 {{"data: text -> token ids (tokenizer)", "13", "tokens [B,T] int32"},
                  {"embed: wte[tok] + wpe[t] | emb[tok]", "01", "x [B,T,C]: the residual stream"}},
                 kFwd, true);
  const double stream_top = y - 6;
  // The stream runs down the left; each branch leaves it (norm) and is added back (+).
  const double sx = 60;
  auto branch = [&](const std::vector<MapBox>& boxes, const std::string& name) {
    const double top = y;
    svg.line(sx, top + 13, fx, top + 13, kBlue, 1.2);
    svg.arrow(fx - 30, top + 13, fx - 1, top + 13, kBlue);
    y = map_column(svg, fx, y, fw, boxes, kFwd, false);
    const double add_y = y - 18 - 13;
    svg.arrow(fx, add_y, sx + 11, add_y, kBlue);
    svg.circle(sx, add_y, 10, "white", kBlue);
    svg.text(sx, add_y + 5, "+", 15, "middle", kBlue, true);
    svg.text(fx + fw + 10, (top + add_y) / 2 + 4, name, 11, "start", kGray);
    y += 4;
  };
  branch({{"norm: LayerNorm | RMSNorm", "02", "[B,T,C]"},
          {"qkv linear C -> 3C", "03", "qkv [B,T,3C]"},
          {"llama: RoPE on q and k", "04", "[B,T,3C]"},
          {"causal attention, NH heads of hs", "05", "[B,T,C]"},
          {"projection linear C -> C", "03", "[B,T,C]"}},
         "attention half");
  branch({{"norm: LayerNorm | RMSNorm", "02", "[B,T,C]"},
          {"fc C -> F | gate, up C -> F", "03", "[B,T,F]"},
          {"GELU | SwiGLU", "06", "[B,T,F]"},
          {"projection | down F -> C", "03", "[B,T,C]"}},
         "feed-forward half");
  const double stream_bottom = y + 13;
  svg.line(sx, stream_top, sx, stream_bottom, kBlue, 4);
  svg.text(sx - 6, stream_top + 4, "x", 12, "end", kBlue, true);
  svg.text(fx + fw + 10, (stream_top + stream_bottom) / 2 + 4, "x L layers", 12, "start", kBlue,
           true);
  svg.line(fx - 12, stream_top + 8, fx - 12, stream_bottom - 20, kGray, 1, true);
  svg.arrow(sx, stream_bottom, fx - 1, stream_bottom, kBlue);
  y = map_column(svg, fx, y, fw,
                 {{"final norm", "02", "[B,T,C]"},
                  {"lm_head linear C -> Vp (gpt2: wte, tied)", "03", "logits [B,T,Vp]"},
                  {"cross-entropy (+ z-loss), dlogits", "07", ""}},
                 kFwd, false);
  svg.text(fx + fw / 2, y + 2, "loss (scalar) and dlogits [B,T,Vp]", 11, "middle", kGray);

  // Backward: the same kernels in reverse, on the right.
  const double bx = 560, bw = 360;
  svg.text(bx + bw / 2, 74, "backward (reverse order), then the optimizer", 14, "middle", kRed,
           true);
  double by = map_column(svg, bx, 84, bw,
                         {{"dlogits = (p - onehot)/(B*T) (+ z-loss)", "07", "[B,T,Vp]"},
                          {"lm_head backward: dx, dW", "11", "[B,T,C]"},
                          {"final norm backward", "02", "dx: the stream's gradient"}},
                         kBwd, true);
  svg.text(bx - 8, by + 8, "per layer, L-1 .. 0", 11, "end", kRed, true);
  by = map_column(svg, bx, by, bw,
                  {{"residual: the gradient to skip and branch", "09", "[B,T,C]"},
                   {"projection | down backward", "11", "[B,T,F]"},
                   {"GELU | SwiGLU backward", "09", "[B,T,F]"},
                   {"fc | gate, up backward (dx adds both)", "11", "[B,T,C]"},
                   {"norm backward, += into the stream", "02", "[B,T,C]"},
                   {"projection backward", "11", "[B,T,C]"},
                   {"attention backward (p from lse)", "10", "dqkv [B,T,3C]"},
                   {"llama: RoPE backward on dq, dk", "04", "[B,T,3C]"},
                   {"qkv backward", "11", "[B,T,C]"},
                   {"norm backward, += into the stream", "02", "[B,T,C]"}},
                  kBwd, true);
  by = map_column(svg, bx, by, bw,
                  {{"embedding backward: scatter-add", "01", "g: every weight's gradient"},
                   {"grad norm, clip, AdamW (two ranges)", "12", "w updated, g = 0"}},
                  kOpt, true);
  // The weight copy of a reduced precision: one of two, side by side.
  const double half = bw / 2 - 4;
  map_column(svg, bx, by, half, {{"mixed: f16 mirror of w", "08", ""}}, kOpt, false);
  map_column(svg, bx + bw - half, by, half, {{"bf16: bf16 mirror of w", "14", ""}}, kOpt, false);
  // Legend.
  const double ly = 826;
  svg.rect(110, ly - 11, 14, 14, kFwd);
  svg.text(130, ly, "forward kernel", 11);
  svg.rect(250, ly - 11, 14, 14, kBwd);
  svg.text(270, ly, "backward kernel", 11);
  svg.rect(400, ly - 11, 14, 14, kOpt);
  svg.text(420, ly, "end of the backward, optimizer", 11);
  svg.line(620, ly - 4, 650, ly - 4, kBlue, 4);
  svg.text(658, ly, "residual stream x [B,T,C]: branches add into it", 11);
  return svg.str();
}

// ---- 00: the two-op graph with values and gradients on its edges -------------------------------

std::string backprop_svg() {
  Inputs in(1);
  const Vec v = in.uniform(3, -1, 1);
  const double x = v[0], w = v[1], dout = v[2];
  const double q = w * x, y = std::tanh(q) + x;
  const double dq = (1 - std::tanh(q) * std::tanh(q)) * dout;
  const double dw = x * dq, dx = dout + w * dq;
  Svg svg(760, 330, "00_backprop: the graph of the worked example, values and gradients");
  svg.text(380, 24, "q = w*x,  out = tanh(q) + x,  L = dout*out   (explain backprop --seed 1)", 14,
           "middle", "#111", true);
  auto node = [&](double cx, double cy, const std::string& label, const char* fill) {
    svg.circle(cx, cy, 24, fill, "#333");
    svg.text(cx, cy + 5, label, 14, "middle", "#111", true);
  };
  // An edge with its forward value (blue) and gradient (red) written at the given points.
  auto edge = [&](double x1, double y1, double x2, double y2, const std::string& val, double vx,
                  double vy, const std::string& grad, double gx, double gy) {
    svg.arrow(x1, y1, x2, y2, "#333", 1.5);
    svg.text(vx, vy, val, 12, "middle", kBlue);
    svg.text(gx, gy, grad, 12, "middle", kRed);
  };
  node(80, 110, "x", kData);
  node(80, 230, "w", kData);
  node(260, 170, "*", kFwd);
  node(430, 170, "tanh", kFwd);
  node(600, 110, "+", kFwd);
  node(700, 110, "L", kOpt);
  edge(104, 116, 237, 160, "x = " + fmtf("%.2f", x), 150, 118, "", 0, 0);
  edge(104, 224, 237, 180, "w = " + fmtf("%.2f", w), 200, 225, "dw = " + fmtf("%.4f", dw), 200,
       242);
  edge(284, 170, 406, 170, "q = " + fmtf("%.4f", q), 345, 162, "dq = " + fmtf("%.4f", dq), 345,
       188);
  edge(454, 160, 577, 118, "tanh q = " + fmtf("%.4f", std::tanh(q)), 470, 126,
       "dout = " + fmtf("%.4f", dout), 560, 160);
  edge(624, 110, 676, 110, "", 0, 0, "", 0, 0);
  svg.text(680, 78, "out = " + fmtf("%.4f", y), 12, "middle", kBlue);
  // The skip edge: x straight to the sum, the path a `dx = ...` (instead of +=) would lose.
  svg.line(80, 86, 80, 60, "#333", 1.5);
  svg.line(80, 60, 600, 60, "#333", 1.5);
  svg.arrow(600, 60, 600, 85, "#333", 1.5);
  svg.text(340, 54, "skip: x goes to the sum too", 12, "middle", "#111");
  svg.text(340, 76, "its gradient 1*dout = " + fmtf("%.4f", dout), 12, "middle", kRed);
  svg.text(40, 285,
           "dx = 1*dout + w*dq = " + fmtf("%.4f", dout) + " + " + fmtf("%.4f", w * dq) + " = " +
               fmtf("%.4f", dx) + "   (x is used twice: its gradients add, +=)",
           13, "start", kRed, true);
  svg.text(40, 310, "blue: forward values, left to right;  red: gradients, right to left", 12,
           "start", kGray);
  return svg.str();
}

// ---- 01: the embedding lookup ------------------------------------------------------------------

std::string embed_svg() {
  const int V = 8, T = 4;
  Inputs in(3);
  const std::vector<int> tok = in.tokens(T, V);
  Svg svg(720, 330, "01_embed: x[t] = wte[tok[t]] + wpe[t]");
  svg.text(360, 24, "x[t] = wte[tok[t]] + wpe[t]: a row lookup, then a row add", 15, "middle",
           "#111", true);
  const double cw = 60, rh = 24;
  // wte: V rows, the looked-up ones coloured.
  svg.text(90, 58, "wte [V, C]", 13, "middle", "#111", true);
  for (int v = 0; v < V; ++v) {
    const bool used = std::find(tok.begin(), tok.end(), v) != tok.end();
    svg.rect(60, 66 + v * rh, cw, rh - 2, used ? "#bcd4f6" : "white");
    svg.text(52, 82 + v * rh, std::to_string(v), 11, "end", kGray);
  }
  svg.text(270, 58, "tokens", 13, "middle", "#111", true);
  svg.text(470, 58, "x [T, C]", 13, "middle", "#111", true);
  svg.text(640, 58, "wpe [maxT, C]", 13, "middle", "#111", true);
  for (int t = 0; t < T; ++t) {
    const double ry = 90 + t * 50;
    svg.rect(245, ry, 50, 26, kData);
    svg.text(270, ry + 18, "t=" + std::to_string(t) + ": " + std::to_string(tok[size_t(t)]), 11,
             "middle");
    svg.arrow(120, 77 + tok[size_t(t)] * rh, 244, ry + 13, kBlue, 1);
    svg.rect(440, ry, cw, 26, "#dbe8d5");
    svg.arrow(296, ry + 13, 439, ry + 13, kBlue, 1);
    svg.rect(610, ry, cw, 26, "#f6e3bc");
    svg.text(602, ry + 18, std::to_string(t), 11, "end", kGray);
    svg.arrow(609, ry + 13, 501, ry + 13, "#b7791f", 1);
    svg.text(555, ry + 9, "+", 13, "middle", "#b7791f", true);
  }
  svg.text(360, 305,
           "backward: dwte[tok[t]] += dx[t] (a token seen twice adds twice), dwpe[t] += dx[t]", 12,
           "middle", kRed);
  return svg.str();
}

// ---- 02: LayerNorm of one row ------------------------------------------------------------------

std::string norm_svg() {
  const int C = 8;
  Inputs in(2);
  const Vec x = in.uniform(C, -1, 3);
  const Vec w(C, 1.0), b(C, 0.0);
  Vec out(C), mean(1), rstd(1);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 1, C);
  const double sd = 1.0 / rstd[0];
  Svg svg(760, 340, "02_norm: LayerNorm of one row");
  svg.text(380, 24,
           "LayerNorm of one row of C = 8 (w = 1, b = 0): shift by the mean, scale by 1/std", 13.5,
           "middle", "#111", true);
  auto panel = [&](double x0, const Vec& vals, const std::string& title, double center, double half,
                   bool band) {
    const Scale sy{-2.2, 3.2, 290, 60};
    svg.text(x0 + 150, 52, title, 13, "middle", "#111", true);
    svg.line(x0, sy(0), x0 + 310, sy(0), "#999");
    for (double t : {-2.0, -1.0, 1.0, 2.0, 3.0}) {
      svg.text(x0 - 6, sy(t) + 4, fmtf("%.0f", t), 10, "end", kGray);
      svg.line(x0 - 3, sy(t), x0, sy(t), "#999");
    }
    svg.text(x0 - 6, sy(0) + 4, "0", 10, "end", kGray);
    if (band) {
      svg.rect(x0, sy(center + half), 310, sy(center - half) - sy(center + half), "#fff5d6", "none",
               0);
    }
    for (int c = 0; c < C; ++c) {
      const double bx = x0 + 10 + c * 37, v = vals[size_t(c)];
      svg.rect(bx, std::min(sy(v), sy(0)), 26, std::abs(sy(v) - sy(0)), kBlue, "none", 0);
      svg.text(bx + 13, v >= 0 ? sy(v) - 4 : sy(v) + 13, fmtf("%.2f", v), 9.5, "middle");
    }
    svg.line(x0, sy(center), x0 + 310, sy(center), kRed, 1.5, true);
  };
  panel(50, x, "x", mean[0], sd, true);
  svg.text(365, 70, "mean = " + fmtf("%.4f", mean[0]), 11.5, "end", kRed);
  panel(420, out, "out = (x - mean) * rstd", 0.0, 1.0, true);
  svg.text(380, 318,
           "red dashed: the mean; yellow band: mean +- std (std = " + fmtf("%.4f", sd) +
               ", rstd = " + fmtf("%.4f", rstd[0]) + "). After: mean 0, std 1.",
           12, "middle", "#111");
  return svg.str();
}

// ---- 03 and 11: the linear layer's products as matrix shapes -----------------------------------

// A rows×cols grid of cells at (x, y), cells in `hi` (row, col pairs) filled.
void grid(Svg& svg, double x, double y, int rows, int cols, const std::string& name,
          const std::vector<std::pair<int, int>>& hi, const char* fill) {
  const double s = 18;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const bool on = std::find(hi.begin(), hi.end(), std::make_pair(r, c)) != hi.end();
      svg.rect(x + c * s, y + r * s, s, s, on ? fill : "white", "#888", 0.8);
    }
  }
  svg.text(x + cols * s / 2, y + rows * s + 16, name, 12, "middle", "#111", true);
}

std::vector<std::pair<int, int>> row_cells(int r, int n) {
  std::vector<std::pair<int, int>> v;
  for (int c = 0; c < n; ++c) v.push_back({r, c});
  return v;
}
std::vector<std::pair<int, int>> col_cells(int c, int n) {
  std::vector<std::pair<int, int>> v;
  for (int r = 0; r < n; ++r) v.push_back({r, c});
  return v;
}

std::string linear_svg() {
  const int N = 4, K = 6, O = 3;
  Svg svg(760, 250, "03_linear: out = inp * w^T + b");
  svg.text(380, 24, "out[r,o] = b[o] + sum_k inp[r,k] * w[o,k]   (N = 4 rows, K = 6 in, O = 3 out)",
           13.5, "middle", "#111", true);
  grid(svg, 40, 70, N, O, "out [N,O]", {{1, 2}}, "#bcd4f6");
  svg.text(110, 130, "=", 20, "middle");
  grid(svg, 130, 70, N, K, "inp [N,K]", row_cells(1, K), "#bcd4f6");
  svg.text(255, 130, "x", 16, "middle");
  grid(svg, 275, 52, K, O, "w^T [K,O]", col_cells(2, K), "#f6e3bc");
  svg.text(345, 130, "+", 20, "middle");
  grid(svg, 365, 106, 1, O, "b [O]", {{0, 2}}, "#dbe8d5");
  svg.text(440, 80, "w is stored [O,K] (nn.Linear):", 12);
  grid(svg, 440, 90, O, K, "w [O,K]: row o = output o's weights", row_cells(2, K), "#f6e3bc");
  svg.text(40, 200, "one output = one row of inp dotted with one row of w, plus its bias:", 12);
  svg.text(40, 220,
           "N*O dot products of length K: 2*N*K*O FLOPs. The fast versions keep this "
           "sum one FMA chain in k order.",
           12);
  return svg.str();
}

std::string linear_backward_svg() {
  const int N = 4, K = 6, O = 3;
  Svg svg(760, 300, "11_linear_backward: the three products");
  svg.text(380, 24, "the backward of out = inp * w^T + b: three products of the same shapes", 13.5,
           "middle", "#111", true);
  // dinp = dout · w
  grid(svg, 30, 60, N, K, "dinp [N,K]", {{1, 4}}, "#f6c6c6");
  svg.text(156, 105, "+=", 16, "middle");
  grid(svg, 178, 60, N, O, "dout [N,O]", row_cells(1, O), "#f6c6c6");
  grid(svg, 250, 60, O, K, "w [O,K]", col_cells(4, O), "#f6e3bc");
  // dw = doutᵀ · inp
  grid(svg, 410, 60, O, K, "dw [O,K]", {{2, 4}}, "#f6c6c6");
  svg.text(536, 105, "+=", 16, "middle");
  grid(svg, 558, 60, O, N, "dout^T [O,N]", row_cells(2, N), "#f6c6c6");
  grid(svg, 638, 60, N, K, "inp [N,K]", col_cells(4, N), "#bcd4f6");
  // db = Σ_r dout
  grid(svg, 30, 190, 1, O, "db [O]", {{0, 2}}, "#f6c6c6");
  svg.text(110, 204, "+=  sum over r of", 12);
  grid(svg, 215, 170, N, O, "dout [N,O]", col_cells(2, N), "#f6c6c6");
  svg.text(330, 185, "dinp[r,k] = sum_o dout[r,o] w[o,k]: each input feeds every output", 12);
  svg.text(330, 205, "dw[o,k] = sum_r dout[r,o] inp[r,k]: one weight, used by all N rows", 12);
  svg.text(330, 225, "db[o] = sum_r dout[r,o]", 12);
  svg.text(330, 250, "all three accumulate (+=) into buffers that start at 0", 12, "start", kRed);
  return svg.str();
}

// ---- 04: RoPE rotates each pair by an angle that grows with the position -----------------------

std::string rope_svg() {
  const int hs = 8, T = 8;
  const double theta = 10000.0;
  // One head; every position holds the same vector, so the figure shows the rotation alone.
  Vec x(size_t(T) * hs, 0.0);
  for (int t = 0; t < T; ++t) {
    x[size_t(t) * hs + 0] = 1.0;  // pair 0: (x[0], x[4])
    x[size_t(t) * hs + 1] = 1.0;  // pair 1: (x[1], x[5])
  }
  Vec out(x.size());
  rope_forward(out.data(), x.data(), 1, T, 1, hs, theta);
  Svg svg(760, 360, "04_rope: the rotation of a pair across positions");
  svg.text(380, 24,
           "RoPE: pair i turns by angle t*f_i, f_i = theta^(-2i/hs)  (hs = 8, theta = 1e4)", 13.5,
           "middle", "#111", true);
  auto dial = [&](double cx, int pair, const std::string& title) {
    const double cy = 185, R = 115;
    svg.text(cx, 56, title, 13, "middle", "#111", true);
    svg.circle(cx, cy, R, "none", "#bbb");
    svg.line(cx - R - 8, cy, cx + R + 8, cy, "#ccc");
    svg.line(cx, cy - R - 8, cx, cy + R + 8, "#ccc");
    for (int t = 0; t < T; ++t) {
      const double a = out[size_t(t) * hs + pair], b = out[size_t(t) * hs + pair + hs / 2];
      const double px = cx + R * a, py = cy - R * b;
      svg.arrow(cx, cy, px, py, t == 0 ? kRed : kBlue, 1.2);
      svg.text(cx + (R + 14) * a, cy - (R + 14) * b + 4, "t=" + std::to_string(t), 10, "middle",
               kGray);
    }
    svg.text(cx + R + 4, cy + 16, "x[i]", 10, "start", kGray);
    svg.text(cx + 6, cy - R - 2, "x[i+hs/2]", 10, "start", kGray);
  };
  dial(200, 0, "pair i = 0: f = 1 rad per position");
  dial(560, 1, "pair i = 1: f = 0.1 rad per position");
  svg.text(380, 345,
           "the same (1, 0) at every position, after rope_forward: the length stays 1, the "
           "angle encodes t",
           12, "middle");
  return svg.str();
}

// ---- 05: the causal mask, the tiles and the running max ----------------------------------------

std::string attention_svg() {
  const int T = 8, tile = 4;
  // Scores s[t,u] from the first seed whose last row has its max in the second key tile, so
  // that the figure shows a rescale (c < 1) happening.
  Vec s;
  for (uint64_t seed = 5;; ++seed) {
    Inputs in(seed);
    s = in.uniform(size_t(T) * T, -2, 2);
    const auto row = s.begin() + (T - 1) * T;
    if (*std::max_element(row + tile, row + T) > *std::max_element(row, row + tile) + 0.5) break;
  }
  Svg svg(800, 400, "05_attention: causal mask, key tiles and the online softmax");
  svg.text(390, 24, "causal attention: row t sees keys u <= t; the fused kernel walks key tiles",
           13.5, "middle", "#111", true);
  const double x0 = 50, y0 = 70, c = 30;
  svg.text(x0 + T * c / 2, y0 - 10, "p[t,u] = softmax over u <= t of s[t,u]", 12, "middle");
  for (int t = 0; t < T; ++t) {
    double m = -1e30, l = 0;
    for (int u = 0; u <= t; ++u) m = std::max(m, s[size_t(t) * T + u]);
    for (int u = 0; u <= t; ++u) l += std::exp(s[size_t(t) * T + u] - m);
    for (int u = 0; u < T; ++u) {
      if (u > t) {
        svg.rect(x0 + u * c, y0 + t * c, c, c, "#eee", "#ccc", 0.5);
        continue;
      }
      const double p = std::exp(s[size_t(t) * T + u] - m) / l;
      const int shade = int(std::lround(235 - 200 * p));
      char fill[16];
      std::snprintf(fill, sizeof fill, "#%02x%02xff", shade, shade);
      svg.rect(x0 + u * c, y0 + t * c, c, c, fill, "#ccc", 0.5);
      const std::string text = fmtf("%.2f", p);
      svg.text(x0 + u * c + c / 2, y0 + t * c + 19, text[0] == '0' ? text.substr(1) : text, 9,
               "middle", p > 0.5 ? "white" : "#111");
    }
    svg.text(x0 - 6, y0 + t * c + 19, std::to_string(t), 10, "end", kGray);
  }
  for (int u = 0; u < T; ++u)
    svg.text(x0 + u * c + c / 2, y0 + T * c + 14, std::to_string(u), 10, "middle", kGray);
  svg.text(x0 + T * c / 2, y0 + T * c + 30, "key u", 11, "middle", kGray);
  // The tiles (here 4 keys; the kernel's are 32).
  svg.rect(x0 + tile * c, y0 + tile * c, tile * c, tile * c, "none", kRed, 2);
  svg.rect(x0, y0 + tile * c, tile * c, tile * c, "none", kGreen, 2);
  svg.rect(x0, y0, tile * c, tile * c, "none", kGreen, 2);
  svg.text(x0 - 30, y0 + T * c + 56,
           "grey: masked (u > t), never computed. Tiles of 4 keys here (the kernel's are 32): "
           "green below the diagonal,",
           11);
  svg.text(x0 - 30, y0 + T * c + 72,
           "every key; red on the diagonal, the loop stops at u = t. The row's p is exp(s - lse).",
           11);
  // The running max and the rescale for the last row, tile by tile.
  const int t = T - 1;
  double m = -1e30, l = 0;
  double tx = 320, ty = 110;
  svg.text(tx, ty - 30, "row t = 7, key tile by key tile (online softmax):", 12.5, "start", "#111",
           true);
  for (int k0 = 0; k0 < T; k0 += tile) {
    double bm = -1e30;
    for (int u = k0; u < k0 + tile; ++u) bm = std::max(bm, s[size_t(t) * T + u]);
    const double m_new = std::max(m, bm);
    const double cfac = std::exp(m - m_new);
    double add = 0;
    for (int u = k0; u < k0 + tile; ++u) add += std::exp(s[size_t(t) * T + u] - m_new);
    const double l_new = l * cfac + add;
    svg.text(tx, ty,
             "keys " + std::to_string(k0) + ".." + std::to_string(k0 + tile - 1) + ": tile max " +
                 fmtf("%.2f", bm) + ", running max mx = " + fmtf("%.2f", m_new),
             12, "start", k0 == 0 ? kGreen : kRed);
    svg.text(tx + 16, ty + 18,
             k0 == 0 ? "rho: none (mx was -inf); l = " + fmtf("%.4f", l_new)
                     : "rescale rho = exp(mx_old - mx_new) = " + fmtf("%.4f", cfac),
             12);
    if (k0 > 0) {
      svg.text(tx + 16, ty + 34, "l = l*rho + " + fmtf("%.4f", add) + " = " + fmtf("%.4f", l_new),
               12);
    }
    m = m_new;
    l = l_new;
    ty += 60;
  }
  svg.text(tx, ty + 6,
           "lse = mx + log l = " + fmtf("%.4f", m + std::log(l)) +
               "  (all the backward keeps of the row)",
           12, "start", "#111", true);
  svg.text(tx, ty + 30, "without rho, the first tile's terms would stay relative to", 12, "start",
           kGray);
  svg.text(tx, ty + 46, "the old max: l, lse and every p of the row would be wrong", 12, "start",
           kGray);
  return svg.str();
}

// ---- 06: the activations and their derivatives -------------------------------------------------

std::string activation_svg() {
  const int n = 161;
  Vec x(n), gelu(n), gelu_erf(n), silu(n), dg(n, 0.0), dge(n, 0.0), dsi(n, 0.0), ones(n, 1.0);
  for (int i = 0; i < n; ++i) x[size_t(i)] = -4.0 + 8.0 * i / (n - 1);
  gelu_forward(gelu.data(), x.data(), size_t(n));
  gelu_erf_forward(gelu_erf.data(), x.data(), size_t(n));
  swiglu_forward(silu.data(), x.data(), ones.data(), size_t(n));  // up = 1: silu(gate)
  gelu_backward(dg.data(), x.data(), ones.data(), size_t(n));     // dout = 1: gelu'(x)
  Vec dup(n, 0.0);
  swiglu_backward(dsi.data(), dup.data(), ones.data(), x.data(), ones.data(), size_t(n));
  Svg svg(760, 360, "06_swiglu: GELU and SiLU and their derivatives");
  svg.text(380, 24, "GELU (tanh form), SiLU = x*sigma(x) and their derivatives, from the kernels",
           13.5, "middle", "#111", true);
  const Scale sx{-4, 4, 60, 500}, sy{-1.2, 4.2, 320, 50};
  for (double t : {-4.0, -2.0, 0.0, 2.0, 4.0}) {
    svg.line(sx(t), sy(-1.2), sx(t), sy(4.2), "#eee");
    svg.text(sx(t), 338, fmtf("%.0f", t), 10, "middle", kGray);
  }
  for (double t : {-1.0, 0.0, 1.0, 2.0, 3.0, 4.0}) {
    svg.line(sx(-4), sy(t), sx(4), sy(t), t == 0 ? "#999" : "#eee");
    svg.text(52, sy(t) + 4, fmtf("%.0f", t), 10, "end", kGray);
  }
  auto curve = [&](const Vec& y, const char* color, bool dashed) {
    Vec px(n), py(n);
    for (int i = 0; i < n; ++i) {
      px[size_t(i)] = sx(x[size_t(i)]);
      py[size_t(i)] = sy(y[size_t(i)]);
    }
    svg.polyline(px, py, color, 2, dashed);
  };
  curve(gelu, kBlue, false);
  curve(silu, kGreen, false);
  curve(dg, kBlue, true);
  curve(dsi, kGreen, true);
  const double lx = 530;
  svg.line(lx, 80, lx + 30, 80, kBlue, 2);
  svg.text(lx + 36, 84, "gelu(x)", 12);
  svg.line(lx, 102, lx + 30, 102, kBlue, 2, true);
  svg.text(lx + 36, 106, "gelu'(x)", 12);
  svg.line(lx, 124, lx + 30, 124, kGreen, 2);
  svg.text(lx + 36, 128, "silu(x) = x sigma(x)", 12);
  svg.line(lx, 146, lx + 30, 146, kGreen, 2, true);
  svg.text(lx + 36, 150, "silu'(x)", 12);
  svg.text(lx, 190, "both bend smoothly near 0", 11.5, "start", kGray);
  svg.text(lx, 206, "where ReLU has a corner;", 11.5, "start", kGray);
  svg.text(lx, 222, "both dip below 0 for x < 0,", 11.5, "start", kGray);
  svg.text(lx, 238, "and their slopes pass 1", 11.5, "start", kGray);
  svg.text(lx, 254, "(up to about 1.1)", 11.5, "start", kGray);
  svg.text(lx, 278, "gelu_erf differs from gelu", 11.5, "start", kGray);
  double diff = 0;
  for (int i = 0; i < n; ++i)
    diff = std::max(diff, std::abs(gelu[size_t(i)] - gelu_erf[size_t(i)]));
  svg.text(lx, 294, "by at most " + fmtf("%.1e", diff) + " here", 11.5, "start", kGray);
  return svg.str();
}

// ---- 07: softmax, the target, and the gradient p - onehot --------------------------------------

std::string loss_svg() {
  const int V = 6;
  Inputs in(7);
  const Vec logits = in.uniform(V, -2, 2);
  const int32_t target = 2;
  Vec losses(1), d(V);
  crossentropy_forward_backward(losses.data(), d.data(), logits.data(), &target, 1, V, V, 1.0, 0.0);
  Svg svg(760, 330, "07_loss: softmax, target and dlogits = p - onehot");
  svg.text(380, 24,
           "one row: logits -> p = softmax; loss = -log p[y]; dlogits = p - onehot (N = 1)", 13.5,
           "middle", "#111", true);
  auto bars = [&](double x0, const Vec& v, const std::string& title, const Scale& sy,
                  const char* color) {
    svg.text(x0 + 110, 56, title, 13, "middle", "#111", true);
    svg.line(x0, sy(0), x0 + 220, sy(0), "#999");
    for (int j = 0; j < V; ++j) {
      const double bx = x0 + 8 + j * 35, val = v[size_t(j)];
      svg.rect(bx, std::min(sy(val), sy(0)), 26, std::abs(sy(val) - sy(0)),
               j == target ? kRed : color, "none", 0);
      svg.text(bx + 13, val >= 0 ? sy(val) - 4 : sy(val) + 13, fmtf("%.2f", val), 9.5, "middle");
      svg.text(bx + 13, 300, "j=" + std::to_string(j), 10, "middle", kGray);
    }
  };
  Vec p(V);
  for (int j = 0; j < V; ++j) p[size_t(j)] = d[size_t(j)] + (j == target ? 1.0 : 0.0);
  bars(20, logits, "logits x", Scale{-2.2, 2.2, 270, 70}, kBlue);
  bars(270, p, "p = softmax(x)", Scale{-1, 1, 270, 70}, kBlue);
  bars(520, d, "dlogits = p - onehot", Scale{-1, 1, 270, 70}, "#999");
  svg.text(380, 322,
           "red: the target y = 2; loss = -log p[2] = " + fmtf("%.4f", losses[0]) +
               ". dlogits sums to 0; descent raises x[y] and lowers the rest",
           11.5, "middle");
  return svg.str();
}

// ---- 08: the bit fields of f32, f16 and bf16 ---------------------------------------------------

std::string bits_of_u32(uint32_t v, int n) {
  std::string s;
  for (int i = n - 1; i >= 0; --i) s += ((v >> i) & 1) ? '1' : '0';
  return s;
}

std::string cast_svg() {
  const float x = 0.1f;
  uint32_t f32;
  std::memcpy(&f32, &x, 4);
  const uint16_t h = f32_to_f16_bits(x);
  const double hv = double(f16_bits_to_f32(h));
  const bf16 bf = f32_to_bf16(x);
  const float bfv = bf16_to_f32(bf);
  Svg svg(800, 330, "08_cast: f32, f16 and bf16 bit fields of 0.1");
  svg.text(400, 24, "0.1 in three formats: sign | exponent | mantissa (round to nearest even)",
           13.5, "middle", "#111", true);
  auto field = [&](double y, const std::string& name, const std::string& bits, int ebits,
                   const std::string& value) {
    const double cw = 19;
    svg.text(20, y + 17, name, 13, "start", "#111", true);
    for (size_t i = 0; i < bits.size(); ++i) {
      const int k = int(i);
      const char* fill = k == 0 ? "#f6c6c6" : k <= ebits ? "#bcd4f6" : "#dbe8d5";
      svg.rect(80 + i * cw, y, cw, 24, fill, "#888", 0.6);
      svg.text(80 + i * cw + cw / 2, y + 17, std::string(1, bits[i]), 11.5, "middle");
    }
    svg.text(80 + bits.size() * cw + 10, y + 17, value, 11.5);
  };
  field(60, "f32", bits_of_u32(f32, 32), 8, "");
  svg.text(80, 104, "= " + fmtf("%.10f", double(x)) + " (0.1 has no exact binary form)", 11.5,
           "start", kGray);
  field(130, "f16", bits_of_u32(h, 16), 5, "= " + fmtf("%.10f", hv));
  svg.text(80, 174,
           "5 exponent bits, 10 mantissa bits: error " + fmtf("%.2e", hv - double(x)) + " = " +
               fmtf("%.3f", (hv - double(x)) / double(x) * 100) +
               " %; 0.1 lies in [2^-4, 2^-3), where f16 values are 2^-14 apart",
           11.5, "start", kGray);
  field(200, "bf16", bits_of_u32(bf.bits, 16), 8, "= " + fmtf("%.10f", double(bfv)));
  svg.text(80, 244,
           "8 exponent bits (f32's range), 7 mantissa bits: error " +
               fmtf("%.2e", double(bfv) - double(x)) + " = " +
               fmtf("%.3f", (double(bfv) - double(x)) / double(x) * 100) +
               " %; bf16 values there are 2^-11 apart",
           11.5, "start", kGray);
  svg.rect(80, 280, 14, 14, "#f6c6c6");
  svg.text(100, 292, "sign", 11.5);
  svg.rect(160, 280, 14, 14, "#bcd4f6");
  svg.text(180, 292, "exponent", 11.5);
  svg.rect(270, 280, 14, 14, "#dbe8d5");
  svg.text(290, 292, "mantissa (the dropped bits decide the rounding)", 11.5);
  return svg.str();
}

// ---- 14: bf16's range against f16's, and the canonical order of the worked example --------------

// One format's bar on the log2 axis: its subnormals (lighter; dashed when reftrain flushes them)
// from `sub` to `normal`, its normal numbers from `normal` to `max`.
void range_bar(Svg& svg, const Scale& x, double y, const std::string& name, float sub, float normal,
               float max, bool flushed) {
  const double ls = std::log2(double(sub)), ln = std::log2(double(normal)),
               lm = std::log2(double(max));
  svg.text(x.a - 12, y + 17, name, 13, "end", "#111", true);
  if (flushed) {
    svg.line(x(ls), y + 12, x(ln), y + 12, kGray, 1, true);
    svg.text(x(ls) - 4, y - 4, "subnormals: 0 in reftrain", 10.5, "start", kGray);
  } else {
    svg.rect(x(ls), y, x(ln) - x(ls), 24, "#dbe8f8", "#888", 0.6);
  }
  svg.rect(x(ln), y, x(lm) - x(ln), 24, "#bcd4f6", "#888", 0.6);
  svg.text(x(lm) + 6, y + 17, fmtf("max %.6g", double(max)), 11, "start", kGray);
}

std::string bf16_range_svg() {
  Svg svg(880, 330, "14_bf16: the range of f32, bf16 and f16, from the program's casts");
  svg.text(440, 24, "Which magnitudes each format holds (log2 |x|): bf16 has f32's range", 13.5,
           "middle", "#111", true);
  const Scale x{-150, 130, 80, 740};
  range_bar(svg, x, 60, "f32", float_of(1), float_of(0x00800000), float_of(0x7F7FFFFF), false);
  range_bar(svg, x, 120, "bf16", bf16_to_f32(bf16{0x0001}), bf16_to_f32(bf16{0x0080}),
            bf16_to_f32(bf16{0x7F7F}), true);
  range_bar(svg, x, 180, "f16", f16_bits_to_f32(0x0001), f16_bits_to_f32(0x0400),
            f16_bits_to_f32(0x7BFF), false);
  // The axis, with the edges of the bars.
  const double ay = 230;
  svg.line(x.a, ay, x.b, ay, "#333", 1);
  const std::vector<int> ticks = {-149, -126, -24, -14, 0, 16, 128};
  for (size_t i = 0; i < ticks.size(); ++i) {
    svg.line(x(ticks[i]), ay, x(ticks[i]), ay + 5, "#333", 1);
    svg.text(x(ticks[i]), ay + 18 + 12 * double(i % 2), "2^" + std::to_string(ticks[i]), 10.5,
             "middle");
  }
  // A gradient the backward meets at once: dlogits of gpt2-124m at init, cast both ways.
  const float g = float(1.0 / 50257 / 4096);
  f16 h;
  cast_f32_to_f16_fast(&h, &g, 1);
  const float as_bf16 = bf16_to_f32(f32_to_bf16(g)), as_f16 = f16_bits_to_f32(bits_of(h));
  const double gx = x(std::log2(double(g)));
  svg.line(gx, 50, gx, ay, kRed, 1.2, true);
  svg.circle(gx, 132, 4, kGreen);
  svg.text(gx + 8, 112, "bf16: " + fmtf("%.4g", double(as_bf16)), 10.5, "start", kGreen);
  svg.text(gx, 197, "x", 14, "middle", kRed, true);
  svg.text(gx + 8, 175, "f16: " + fmtf("%g", double(as_f16)) + " (underflow)", 10.5, "start", kRed);
  svg.text(x.a, 282,
           "red: 1/V/N = " + fmtf("%.3g", double(g)) +
               ", one dlogits value of gpt2-124m at init (V = 50257, N = 4*1024 positions)",
           11, "start", kRed);
  svg.text(x.a, 300,
           "f16 training multiplies the loss by a scale S so that such gradients land inside "
           "f16's bar;",
           11, "start", kGray);
  svg.text(x.a, 316, "bf16 covers f32's normal range, so it needs no scale (8 significant bits).",
           11, "start", kGray);
  return svg.str();
}

// A block's k as cells: even k blue, odd k green, the padding grey; the chains and acc below.
void order_block(Svg& svg, const Bf16Dot& d, size_t b, double x0, double y) {
  const double cw = 12;
  for (int i = 0; i < 32; ++i) {
    const int k = int(b) * 32 + i;
    const char* fill = k >= Bf16Dot::kK ? kData : k % 2 == 0 ? "#bcd4f6" : "#dbe8d5";
    svg.rect(x0 + i * cw, y, cw, 22, fill, "#888", 0.6);
  }
  const int first = int(b) * 32, last = std::min(first + 31, Bf16Dot::kK - 1);
  svg.text(x0 + 6, y - 6, "k = " + std::to_string(first), 10.5, "middle", kGray);
  svg.text(x0 + (last - first) * cw + 6, y - 6, std::to_string(last), 10.5, "middle", kGray);
  svg.text(x0, y + 44,
           "even chain, k = " + std::to_string(first) + ", " + std::to_string(first + 2) +
               ", ..: " + fmtf("%.6e", double(d.even[b])),
           11, "start", kBlue);
  svg.text(x0, y + 62,
           "odd chain, k = " + std::to_string(first + 1) + ", " + std::to_string(first + 3) +
               ", ..: " + fmtf("%.6e", double(d.odd[b])),
           11, "start", kGreen);
  svg.rect(x0, y + 76, 32 * cw, 26, kOpt);
  svg.text(x0 + 8, y + 94,
           std::string("acc = ") + (b == 0 ? "+0" : "acc") +
               " + (even + odd) = " + fmtf("%.6e", double(d.acc[b])),
           11.5);
}

std::string bf16_order_svg() {
  const Bf16Dot d = bf16_dot_example(1);
  Svg svg(880, 320, "14_bf16: the canonical bf16 order on the worked example");
  svg.text(440, 24, "explain bf16_dot --seed 1: K = 40 in blocks of 32, the last padded with zeros",
           13.5, "middle", "#111", true);
  const double y = 60, x0 = 40, x1 = 456;
  order_block(svg, d, 0, x0, y);
  order_block(svg, d, 1, x1, y);
  svg.arrow(x0 + 384, y + 89, x1 - 1, y + 89, "#333");
  svg.text(x1 + 14 * 12, y - 6, "40..63: zero padding", 10.5, "start", kGray);
  // The sequential order: one chain through the 40 real k.
  const double sy = 220;
  svg.arrow(x0, sy, x1 + 8 * 12, sy, kRed, 1.5);
  svg.text(x0, sy - 8,
           "sequential (the fp32 matmul's order): one chain, k = 0, 1, .., 39: " +
               fmtf("%.6e", double(d.sequential())),
           11, "start", kRed);
  const float c = d.canonical(), s = d.sequential();
  auto hex = [](float v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08X", unsigned(bits_of(v)));
    return std::string(buf);
  };
  svg.text(x0, 262,
           "canonical " + hex(c) + ", sequential " + hex(s) + ": " +
               std::to_string(ulps_between(c, s)) + " ulp apart; the same fma, another order",
           11.5, "start", "#111", true);
  svg.text(x0, 284,
           "The canonical order is what AMX's TDPBF16PS computes per block of 32: the fastest "
           "hardware runs it",
           11, "start", kGray);
  svg.text(x0, 300, "at full rate, and plain FMAs under FTZ and DAZ reproduce it everywhere.", 11,
           "start", kGray);
  return svg.str();
}

// ---- 09: the feed-forward block's gradient flow ------------------------------------------------

std::string ffn_backward_svg() {
  Svg svg(780, 300, "09_backward_ffn: where each gradient flows");
  svg.text(390, 24, "the feed-forward half of a layer: forward (blue) and backward (red)", 13.5,
           "middle", "#111", true);
  const std::vector<std::string> names = {"norm", "fc | gate, up", "GELU | SwiGLU", "proj | down"};
  const std::vector<std::string> pages = {"02", "11", "06, 09", "11"};
  const std::vector<std::string> fwd = {"ln [N,C]", "h [N,F]", "act [N,F]"};
  const std::vector<std::string> bwd = {"dln", "dh | dgate, dup", "dact | dswi"};
  const double y = 110, w = 120, gap = 40;
  for (size_t i = 0; i < names.size(); ++i) {
    const double bx = 90 + i * (w + gap);
    svg.rect(bx, y, w, 40, kFwd);
    svg.text(bx + w / 2, y + 18, names[i], 12, "middle", "#111", true);
    svg.text(bx + w / 2, y + 33, "page " + pages[i], 10.5, "middle", kGray);
    if (i + 1 < names.size()) {
      svg.arrow(bx + w, y + 12, bx + w + gap - 1, y + 12, kBlue);
      svg.text(bx + w + gap / 2, y - 4, fwd[i], 10, "middle", kBlue);
      svg.arrow(bx + w + gap, y + 30, bx + w + 1, y + 30, kRed);
      svg.text(bx + w + gap / 2, y + 56, bwd[i], 10, "middle", kRed);
    }
  }
  // The skip path: x to the sum and back.
  const double end = 90 + 4 * (w + gap) - gap;
  svg.line(40, 70, 40, 240, kBlue, 4);
  svg.arrow(40, 130, 89, 130, kBlue);
  svg.circle(end + 40, 130, 11, "white", kBlue);
  svg.text(end + 40, 135, "+", 14, "middle", kBlue, true);
  svg.arrow(end, 122, end + 28, 126, kBlue);
  svg.line(40, 70, end + 40, 70, kBlue, 2);
  svg.arrow(end + 40, 70, end + 40, 118, kBlue);
  svg.text(360, 64, "skip: x + ffn(norm(x))", 11, "middle", kBlue);
  svg.text(end + 40, 160, "y", 12, "middle", kBlue, true);
  svg.text(60, 200,
           "backward: dout arrives at the sum and goes unchanged to both the skip and the branch;",
           12, "start", kRed);
  svg.text(60, 218,
           "the branch runs right to left, and the norm's backward adds (+=) its dx to the skip's.",
           12, "start", kRed);
  svg.text(60, 244,
           "SwiGLU: x feeds gate and up, so dx = dgate*Wgate + dup*Wup: two products that add.", 12,
           "start", "#111");
  svg.text(60, 262, "Every stage reads only what its forward saved (h, or gate and up).", 12,
           "start", "#111");
  return svg.str();
}

// ---- 10: attention's backward: p and ds on a small causal problem ------------------------------

std::string attention_backward_svg() {
  const int T = 6;
  Inputs in(10);
  const Vec s = in.uniform(size_t(T) * T, -2, 2);
  const Vec dp = in.uniform(size_t(T) * T, -1, 1);
  Vec p(size_t(T) * T, 0.0), ds(size_t(T) * T, 0.0);
  for (int t = 0; t < T; ++t) {
    double m = -1e30, l = 0, dot = 0;
    for (int u = 0; u <= t; ++u) m = std::max(m, s[size_t(t) * T + u]);
    for (int u = 0; u <= t; ++u) l += std::exp(s[size_t(t) * T + u] - m);
    for (int u = 0; u <= t; ++u) p[size_t(t) * T + u] = std::exp(s[size_t(t) * T + u] - m) / l;
    for (int u = 0; u <= t; ++u) dot += p[size_t(t) * T + u] * dp[size_t(t) * T + u];
    for (int u = 0; u <= t; ++u) {
      ds[size_t(t) * T + u] = p[size_t(t) * T + u] * (dp[size_t(t) * T + u] - dot);
    }
  }
  Svg svg(780, 340, "10_attention_backward: ds = p * (dp - sum p*dp), row by row");
  svg.text(390, 24,
           "softmax backward per row: ds[t,u] = p[t,u] * (dp[t,u] - D_t),  D_t = sum_u p*dp", 13,
           "middle", "#111", true);
  auto heat = [&](double x0, const Vec& v, const std::string& title, bool signed_map) {
    const double c = 36, y0 = 70;
    svg.text(x0 + T * c / 2, y0 - 10, title, 12.5, "middle", "#111", true);
    for (int t = 0; t < T; ++t) {
      double row = 0;
      for (int u = 0; u < T; ++u) {
        if (u > t) {
          svg.rect(x0 + u * c, y0 + t * c, c, c, "#eee", "#ccc", 0.5);
          continue;
        }
        const double val = v[size_t(t) * T + u];
        row += val;
        const double a = std::min(1.0, std::abs(val) * (signed_map ? 4.0 : 1.0));
        const int shade = int(std::lround(255 - 150 * a));
        char fill[16];
        if (signed_map && val < 0) {
          std::snprintf(fill, sizeof fill, "#%02x%02xff", shade, shade);
        } else if (signed_map) {
          std::snprintf(fill, sizeof fill, "#ff%02x%02x", shade, shade);
        } else {
          std::snprintf(fill, sizeof fill, "#%02x%02xff", shade, shade);
        }
        svg.rect(x0 + u * c, y0 + t * c, c, c, fill, "#ccc", 0.5);
        svg.text(x0 + u * c + c / 2, y0 + t * c + 22, fmtf("%.2f", val), 9, "middle");
      }
      // A row of ds sums to 0 up to rounding: print a residue as 0.00, not -0.00.
      svg.text(x0 + T * c + 6, y0 + t * c + 22,
               "sum " + fmtf("%.2f", std::abs(row) < 5e-3 ? 0 : row), 10, "start", kGray);
    }
  };
  heat(40, p, "p (rows sum to 1)", false);
  heat(420, ds, "ds (rows sum to 0)", true);
  svg.text(390, 312,
           "ds keeps the mask of p, and each row sums to 0: adding a constant to a row's scores "
           "changes nothing",
           11.5, "middle");
  return svg.str();
}

// ---- 12: Adam's moments, the bias correction and the step --------------------------------------

std::string optimizer_svg() {
  const int steps = 40;
  Inputs in(12);
  const Vec noise = in.uniform(steps, -1, 1);
  float w = 0, m = 0, v = 0;
  const AdamWHyper hp{1.0f, 0.9f, 0.99f, 1e-8f, 0.0f};
  Vec gs, ms, mhats, upd;
  for (int t = 1; t <= steps; ++t) {
    // A gradient of mean 0.3 with noise of ±1: the mean is what Adam should follow.
    float g = float(0.3 + noise[size_t(t - 1)]);
    const float before = w;
    const GradStats stats{std::abs(g), 1.0f};
    adamw_update(&w, &g, &m, &v, 1, stats, hp, t);
    gs.push_back(0.3 + noise[size_t(t - 1)]);
    ms.push_back(m);
    mhats.push_back(m / (1 - std::pow(0.9, t)));
    upd.push_back(before - w);  // lr = 1: the step itself
  }
  Svg svg(760, 340, "12_optimizer: Adam's moments and step for one weight");
  svg.text(380, 24, "one weight, 40 steps of a noisy gradient (mean 0.3), adamw_update with lr = 1",
           13.5, "middle", "#111", true);
  const Scale sx{1, double(steps), 60, 560}, sy{-1.0, 1.4, 300, 50};
  for (double t : {-1.0, -0.5, 0.0, 0.5, 1.0}) {
    svg.line(sx(1), sy(t), sx(steps), sy(t), t == 0 ? "#999" : "#eee");
    svg.text(52, sy(t) + 4, fmtf("%.1f", t), 10, "end", kGray);
  }
  for (int t : {1, 10, 20, 30, 40}) svg.text(sx(t), 318, std::to_string(t), 10, "middle", kGray);
  svg.text(310, 334, "step t", 11, "middle", kGray);
  auto series = [&](const Vec& y, const char* color, bool dots, bool dashed) {
    Vec px, py;
    for (size_t i = 0; i < y.size(); ++i) {
      px.push_back(sx(double(i + 1)));
      py.push_back(sy(y[i]));
      if (dots) svg.circle(px.back(), py.back(), 2.5, color);
    }
    if (!dots) svg.polyline(px, py, color, 2, dashed);
  };
  series(gs, "#aaa", true, false);
  series(ms, kGreen, false, true);
  series(mhats, kGreen, false, false);
  series(upd, kRed, false, false);
  const double lx = 575;
  svg.circle(lx + 15, 80, 3, "#aaa");
  svg.text(lx + 36, 84, "g (noisy)", 12);
  svg.line(lx, 102, lx + 30, 102, kGreen, 2, true);
  svg.text(lx + 36, 106, "m (starts at 0)", 12);
  svg.line(lx, 124, lx + 30, 124, kGreen, 2);
  svg.text(lx + 36, 128, "m_hat = m/(1-b1^t)", 12);
  svg.line(lx, 146, lx + 30, 146, kRed, 2);
  svg.text(lx + 36, 150, "step = m_hat/", 12);
  svg.text(lx + 36, 166, "(sqrt(v_hat)+eps)", 12);
  svg.text(lx, 200, "step 1 is exactly 1: the", 11.5, "start", kGray);
  svg.text(lx, 216, "bias-corrected ratio is", 11.5, "start", kGray);
  svg.text(lx, 232, "g/|g| whatever g's size.", 11.5, "start", kGray);
  svg.text(lx, 256, "Later the step is the", 11.5, "start", kGray);
  svg.text(lx, 272, "mean over the noise: < 1.", 11.5, "start", kGray);
  return svg.str();
}

// ---- 13: BPE merges grow the tokens ------------------------------------------------------------

std::string bpe_svg() {
  const std::string text = "aaabdaaabac";
  Svg svg(760, 320, "13_tokenizer: BPE merges grow the tokens");
  svg.text(380, 24, "train_bpe on 'aaabdaaabac': each merge joins the most frequent pair", 13.5,
           "middle", "#111", true);
  double y = 56;
  for (int merges = 0; merges <= 3; ++merges) {
    const Tokenizer tok = train_bpe(text, kMinTrainVocab + merges, "figure");
    const std::vector<int32_t> ids = tok.encode(text);
    const std::string label = merges == 0 ? "bytes"
                                          : "merge " + std::to_string(merges) + ": " +
                                                tok.token_bytes(256 + merges - 1) + " (id " +
                                                std::to_string(256 + merges - 1) + ")";
    svg.text(20, y + 36, label, 12, "start", "#111", true);
    double x = 230;
    for (int32_t id : ids) {
      const std::string bytes = tok.token_bytes(id);
      const double w = 22.0 * double(bytes.size());
      svg.rect(x, y + 20, w, 26, id >= 256 ? "#bcd4f6" : kData);
      svg.text(x + w / 2, y + 38, bytes, 13, "middle");
      svg.text(x + w / 2, y + 60, std::to_string(id), 9.5, "middle", kGray);
      x += w + 4;
    }
    svg.text(x + 10, y + 38, std::to_string(ids.size()) + " tokens", 12, "start", kGray);
    y += 58;
  }
  svg.text(20, 310,
           "grey numbers: the token ids (a byte's id is its place in GPT-2's byte order: "
           "'a' is 64); merges take ids 256, 257, ...",
           11, "start", kGray);
  return svg.str();
}

}  // namespace

const std::vector<Figure>& figures() {
  static const std::vector<Figure> all = {
      {"map", "docs/map.md", map_svg},
      {"backprop_graph", "docs/kernels/00_backprop.md", backprop_svg},
      {"embed_lookup", "docs/kernels/01_embed.md", embed_svg},
      {"layernorm_row", "docs/kernels/02_norm.md", norm_svg},
      {"linear_shapes", "docs/kernels/03_linear.md", linear_svg},
      {"rope_rotation", "docs/kernels/04_rope.md", rope_svg},
      {"attention_tiles", "docs/kernels/05_attention.md", attention_svg},
      {"activations", "docs/kernels/06_swiglu.md", activation_svg},
      {"softmax_loss", "docs/kernels/07_loss.md", loss_svg},
      {"float_bits", "docs/kernels/08_cast.md", cast_svg},
      {"bf16_range", "docs/kernels/14_bf16.md", bf16_range_svg},
      {"bf16_order", "docs/kernels/14_bf16.md", bf16_order_svg},
      {"ffn_backward", "docs/kernels/09_backward_ffn.md", ffn_backward_svg},
      {"attention_backward", "docs/kernels/10_attention_backward.md", attention_backward_svg},
      {"linear_backward", "docs/kernels/11_linear_backward.md", linear_backward_svg},
      {"adam_step", "docs/kernels/12_optimizer.md", optimizer_svg},
      {"bpe_merges", "docs/kernels/13_tokenizer.md", bpe_svg},
  };
  return all;
}

}  // namespace reftrain::explain
