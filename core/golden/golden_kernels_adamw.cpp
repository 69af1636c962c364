// Golden fixtures of the optimizer: optim/adamw's (reduce_norm_sq, finalize_grad_stats,
// adamw_update, adamw_update_f16, adamw_update_bf16, adamw_update_bf16_sr,
// adamw_update_bf16_kahan) and optim/adamw8bit's
// (adamw_8bit_update), in one file because they share the gradient and state drawing (make_grads,
// make_adamw_common), the step's uniforms and the tolerances. Their bindings are the WGSL bind
// groups of 12_optimizer.wgsl, in order (adamw_update_bf16, which the study lacks, binds
// adamw_update's and then the bf16 mirror, as our twin tests/webgpu/kernels/optimizer_bf16.wgsl
// does); the references are the plain-named kernels of optim/, which exist in float only (no
// float64 recomputation). The "nonfinite" case puts NaN and ±Inf into the gradients, which the
// kernels must drop; WGSL lets an implementation assume no NaN or Inf exist, so a WebGPU twin may
// skip that case.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/golden/golden_kernels.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"

namespace reftrain {

namespace {

using namespace fixture;

const char* const kSeed004 = "004_ebfe072bf2a522fd.txt";

// ---- gradient norm -----------------------------------------------------------------------

// Gradients: normal, 0.1 (small: its norm, ~2.3, is clipped to 1) or 0.01 (awkward: ~0.35, not
// clipped; large: ~8.9, clipped); the nonfinite case adds +Inf, NaN and −Inf, which every kernel
// here must skip.
std::vector<float> make_grads(FixtureGen& g, const KernelDims& d, const std::string& name) {
  std::vector<float> v = g.draw_normal(name, size_t(d.n), d.name == "small" ? 0.1 : 0.01);
  if (d.name == "nonfinite") v[3] = INFINITY, v[100] = NAN, v[size_t(d.n) - 2] = -INFINITY;
  g.add(name, {d.n}, v);
  return v;
}

constexpr float kMaxNorm = 1.0f;

Json make_reduce_norm_sq(FixtureGen& g, const KernelDims& d) {
  make_grads(g, d, "data");
  return {{"n", d.n}};
}

void run_reduce_norm_sq(FixtureIo<float>& io, const KernelDims& d) {
  const float norm_sq = float(reduce_norm_sq(io.get("data").data(), size_t(d.n)));
  io.put("result", {1}, {norm_sq});
}

Json make_finalize_grad_stats(FixtureGen& g, const KernelDims& d) {
  const std::vector<float> norm_sq = {d.name == "small" ? 5.0f : 0.25f};  // clipped, not clipped
  g.add("norm_sq", {1}, norm_sq);
  return {{"max_norm", kMaxNorm}};
}

void run_finalize_grad_stats(FixtureIo<float>& io, const KernelDims&) {
  const GradStats s = finalize_grad_stats(double(io.get("norm_sq")[0]), kMaxNorm);
  io.put("grad_stats", {2}, {s.grad_norm, s.clip});
}

// ---- AdamW -------------------------------------------------------------------------------

// The step's uniforms as the GPU receives them: hp = (lr, β1, β2, wd), bias = (β1^t, β2^t, ε, 0)
// with β^t = pow in double rounded to f32, and the step number t itself for reftrain's kernels.
struct Step {
  int t;
  AdamWHyper hp;
};
Step step_of(const KernelDims& d) {
  return {d.name == "small" ? 1 : 10, {1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f}};
}

// w, g, m, v and the uniforms; m and v zero at t = 1 (the first step), otherwise an Adam state;
// bf16_weights: w rounded to bf16 (the weights of bf16-kahan). Returns the fp32 m and v drawn
// (for the 8-bit kernel to quantize).
std::pair<std::vector<float>, std::vector<float>> make_adamw_common(FixtureGen& g,
                                                                    const KernelDims& d,
                                                                    bool fp32_state,
                                                                    bool bf16_weights = false) {
  const Step s = step_of(d);
  if (bf16_weights) {
    std::vector<float> w = g.draw_normal("w_in", size_t(d.n), 0.5);
    for (float& x : w) x = bf16_to_f32(f32_to_bf16(x));
    g.add("w_in", {d.n}, w);
  } else {
    g.normal("w_in", {d.n}, 0.5);
  }
  const std::vector<float> grads = make_grads(g, d, "g_in");
  std::vector<float> m(size_t(d.n), 0.0f), v(size_t(d.n), 0.0f);
  if (s.t > 1) {
    m = g.draw_normal("m", size_t(d.n), 0.01);
    v = g.draw_normal("v", size_t(d.n), 0.01);
    for (float& x : v) x *= x;
  }
  if (fp32_state) g.add("m_in", {d.n}, m), g.add("v_in", {d.n}, v);
  const GradStats st = finalize_grad_stats(reduce_norm_sq(grads.data(), grads.size()), kMaxNorm);
  g.add("grad_stats", {2}, {st.grad_norm, st.clip});
  g.add("hp", {4}, {s.hp.lr, s.hp.beta1, s.hp.beta2, s.hp.wd});
  g.add("bias", {4},
        {float(std::pow(double(s.hp.beta1), s.t)), float(std::pow(double(s.hp.beta2), s.t)),
         s.hp.eps, 0.0f});
  const int32_t t = s.t;
  g.add_raw("t", DType::kI32, {1}, &t);
  return {m, v};
}

Json adamw_params(const KernelDims& d) {
  const Step s = step_of(d);
  return {{"size", d.n},         {"t", s.t},        {"lr", s.hp.lr}, {"beta1", s.hp.beta1},
          {"beta2", s.hp.beta2}, {"eps", s.hp.eps}, {"wd", s.hp.wd}, {"max_norm", kMaxNorm}};
}

Json make_adamw(FixtureGen& g, const KernelDims& d) {
  make_adamw_common(g, d, true);
  return adamw_params(d);
}

// The fp32 state after the step, and the hyperparameters the fixture gives.
struct AdamWState {
  std::vector<float> w, g, m, v;
  GradStats stats;
  AdamWHyper hp;
  int t;
};
AdamWState read_state(FixtureIo<float>& io, bool fp32_state) {
  AdamWState s{io.get("w_in"), io.get("g_in"), {}, {}, {}, {}, io.ints("t")[0]};
  if (fp32_state) s.m = io.get("m_in"), s.v = io.get("v_in");
  const std::vector<float> gs = io.get("grad_stats"), hp = io.get("hp"), bias = io.get("bias");
  s.stats = {gs[0], gs[1]};
  s.hp = {hp[0], hp[1], hp[2], bias[2], hp[3]};
  return s;
}

void put_state(FixtureIo<float>& io, const AdamWState& s, const KernelDims& d, bool fp32_state) {
  io.put("w", {d.n}, s.w);
  io.put("g", {d.n}, s.g);
  if (fp32_state) io.put("m", {d.n}, s.m), io.put("v", {d.n}, s.v);
}

void run_adamw(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, true);
  adamw_update(s.w.data(), s.g.data(), s.m.data(), s.v.data(), size_t(d.n), s.stats, s.hp, s.t);
  put_state(io, s, d, true);
}

void run_adamw_f16(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, true);
  std::vector<f16> w16(size_t(d.n));
  adamw_update_f16(s.w.data(), s.g.data(), s.m.data(), s.v.data(), w16.data(), size_t(d.n), s.stats,
                   s.hp, s.t);
  put_state(io, s, d, true);
  io.put_raw("w16", DType::kF16, {d.n}, w16.data());
}

void run_adamw_bf16(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, true);
  std::vector<bf16> wb16(size_t(d.n));
  adamw_update_bf16(s.w.data(), s.g.data(), s.m.data(), s.v.data(), wb16.data(), size_t(d.n),
                    s.stats, s.hp, s.t);
  put_state(io, s, d, true);
  io.put_raw("wb16", DType::kBF16, {d.n}, wb16.data());
}

// bf16-pure's update: the noise's seed, and the mega-buffer index of the range's first element,
// not 0, so that a twin that leaves it out fails.
constexpr uint32_t kNoiseSeed = 20261205u, kFirst = 1000u;

Json make_adamw_sr(FixtureGen& g, const KernelDims& d) {
  make_adamw_common(g, d, true);
  Json p = adamw_params(d);
  p["seed"] = kNoiseSeed, p["first"] = kFirst;
  return p;
}

void run_adamw_bf16_sr(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, true);
  std::vector<bf16> wb16(size_t(d.n));
  adamw_update_bf16_sr(s.w.data(), s.g.data(), s.m.data(), s.v.data(), wb16.data(), size_t(d.n),
                       s.stats, s.hp, s.t, kNoiseSeed, kFirst);
  put_state(io, s, d, true);
  io.put_raw("wb16", DType::kBF16, {d.n}, wb16.data());
}

// bf16-kahan's update: the weights are bf16 values, as the run keeps them, and the compensation
// carried in is a bf16 of about half a weight ulp (2^-9 of |w| ~ 0.5: ~1e-3).
Json make_adamw_kahan(FixtureGen& g, const KernelDims& d) {
  make_adamw_common(g, d, true, true);
  std::vector<bf16> comp(size_t(d.n));
  const std::vector<float> c = g.draw_normal("comp", size_t(d.n), 1e-3);
  cast_f32_to_bf16(comp.data(), c.data(), c.size());
  g.add_raw("comp_in", DType::kBF16, {d.n}, comp.data());
  return adamw_params(d);
}

void run_adamw_bf16_kahan(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, true);
  std::vector<bf16> wb16(size_t(d.n)), comp(size_t(d.n));
  const std::vector<uint16_t> comp_in = io.bf16_bits("comp_in");
  for (size_t i = 0; i < comp.size(); ++i) comp[i].bits = comp_in[i];
  adamw_update_bf16_kahan(s.w.data(), s.g.data(), s.m.data(), s.v.data(), wb16.data(), comp.data(),
                          size_t(d.n), s.stats, s.hp, s.t);
  put_state(io, s, d, true);
  io.put_raw("wb16", DType::kBF16, {d.n}, wb16.data());
  io.put_raw("comp", DType::kBF16, {d.n}, comp.data());
}

// 8-bit state: the fp32 m and v quantized block by block (256 elements), codes packed 4 per u32
// (element 4i+j in byte j of word i: the byte array in element order).
Json make_adamw_8bit(FixtureGen& g, const KernelDims& d) {
  const auto [m, v] = make_adamw_common(g, d, false);
  const size_t n = size_t(d.n), blocks = quant_blocks(n);
  std::vector<uint8_t> mc(4 * quant_words(n), 0), vc(4 * quant_words(n), 0);
  std::vector<float> ms(blocks), vs(blocks);
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kQuantBlock, count = std::min(kQuantBlock, n - begin);
    quantize_m(m.data() + begin, count, mc.data() + begin, &ms[b]);
    quantize_v(v.data() + begin, count, vc.data() + begin, &vs[b]);
  }
  const int64_t bytes = int64_t(mc.size()), nb = int64_t(blocks);
  g.add_raw("m_packed_in", DType::kU8, {bytes}, mc.data());
  g.add_raw("v_packed_in", DType::kU8, {bytes}, vc.data());
  g.add("m_scale_in", {nb}, ms);
  g.add("v_scale_in", {nb}, vs);
  return adamw_params(d);
}

std::vector<uint32_t> words_of(const std::vector<uint8_t>& bytes) {
  std::vector<uint32_t> w(bytes.size() / 4);
  std::memcpy(w.data(), bytes.data(), bytes.size());
  return w;
}

void run_adamw_8bit(FixtureIo<float>& io, const KernelDims& d) {
  AdamWState s = read_state(io, false);
  std::vector<uint32_t> mc = words_of(io.bytes("m_packed_in")),
                        vc = words_of(io.bytes("v_packed_in"));
  std::vector<float> ms = io.get("m_scale_in"), vs = io.get("v_scale_in");
  adamw_8bit_update(s.w.data(), s.g.data(), mc.data(), vc.data(), ms.data(), vs.data(), size_t(d.n),
                    s.stats, s.hp, s.t);
  put_state(io, s, d, false);
  const int64_t bytes = int64_t(mc.size()) * 4, nb = int64_t(ms.size());
  io.put_raw("m_packed", DType::kU8, {bytes}, mc.data());
  io.put_raw("v_packed", DType::kU8, {bytes}, vc.data());
  io.put("m_scale", {nb}, ms);
  io.put("v_scale", {nb}, vs);
}

// ---- tolerances --------------------------------------------------------------------------

Tolerance weight_tolerance() {
  return close(2.4e-7, 1e-8,
               "2 ulps of w plus 1e-5·lr (lr = 1e-3): WGSL's ÷ (2.5 ulp) and √ change the step "
               "m̂/(√v̂+ε) by ~1e-6 of itself; a wrong bias correction or decay moves it by ≥1e-3");
}

Tolerance moment_tolerance() {
  return nmse(1e-12,
              "each element is a few correctly rounded + and ·: a contracted FMA changes it by an "
              "ulp (NMSE ~1e-14); a wrong β or a missed clip gives NMSE ≥ 1e-6");
}

Tolerance zero_gradient() {
  return close(0, 0, "the gradient is zeroed in the same pass: exactly 0");
}

KernelSpec adamw_spec(const std::string& name, Json (*make)(FixtureGen&, const KernelDims&),
                      void (*run)(FixtureIo<float>&, const KernelDims&)) {
  return seed_kernel(name, kSeed004, {{"w", weight_tolerance()}, {"g", zero_gradient()}},
                     {"small", "awkward", "nonfinite"}, make, run);
}

void add_grad_norm_kernels(std::vector<KernelSpec>& v) {
  v.push_back(seed_kernel(
      "reduce_norm_sq", kSeed004,
      {{"result", close(1e-5, 0,
                        "an f32 tree plus atomic adds err by ~log2(n)·2^-24 and a few ulps per "
                        "workgroup: 1e-5 holds to n ~ 1e6")}},
      {"small", "awkward", "nonfinite"}, make_reduce_norm_sq, run_reduce_norm_sq));
  v.push_back(seed_kernel("finalize_grad_stats", kSeed004,
                          {{"grad_stats", ulps(4, "one √ and one ÷ (WGSL: ÷ within 2.5 ulp)")}},
                          {"small", "awkward"}, make_finalize_grad_stats, run_finalize_grad_stats));
}

}  // namespace

void add_adamw_kernels(std::vector<KernelSpec>& v) {
  add_grad_norm_kernels(v);
  KernelSpec a = adamw_spec("adamw_update", make_adamw, run_adamw);
  a.tolerances["m"] = a.tolerances["v"] = moment_tolerance();
  v.push_back(a);
  KernelSpec f = adamw_spec("adamw_update_f16", make_adamw, run_adamw_f16);
  f.tolerances["m"] = f.tolerances["v"] = moment_tolerance();
  f.tolerances["w16"] = mirror_tolerance();
  v.push_back(f);
  KernelSpec b = adamw_spec("adamw_update_bf16", make_adamw, run_adamw_bf16);
  b.twin_seed = "";  // the GPU study has no bf16 kernel
  b.tolerances["m"] = b.tolerances["v"] = moment_tolerance();
  b.tolerances["wb16"] = ulps(1,
                              "the rounding is integer arithmetic, exact in any twin, but of the "
                              "twin's w, which may lie an ulp from reftrain's (WGSL's ÷): where w "
                              "is on a bf16 rounding boundary it rounds to the neighbouring bf16");
  b.numerics = bf16_numerics(false);
  v.push_back(b);
  KernelSpec s = adamw_spec("adamw_update_bf16_sr", make_adamw_sr, run_adamw_bf16_sr);
  s.twin_seed = "";
  s.tolerances["m"] = s.tolerances["v"] = moment_tolerance();
  s.tolerances["wb16"] = ulps(1,
                              "the noise and the rounding are integer arithmetic, exact in any "
                              "twin, but of the twin's new w, which may lie an ulp from "
                              "reftrain's (WGSL's ÷): the carry then differs for 1 noise value "
                              "in 2^16, and the weight lands on the neighbouring bf16");
  s.tolerances["w"] = close(7.9e-3, 0,
                            "w is the widening of wb16: one bf16 step (at most 2^-7 of |w|) "
                            "where wb16 lands on its neighbour; a missed rounding leaves w's "
                            "low 16 bits set, a wrong noise moves half the weights a step");
  s.numerics = bf16_numerics(false);
  s.numerics["stochastic_rounding"] =
      "wb16 = (bits(w) + noise) >> 16 with bf16's subnormal and NaN rules; noise = mix(first + i "
      "^ mix(t ^ mix(seed))) >> 16 over u32, mix(x): x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> "
      "15; x *= 0x846CA68B; x ^= x >> 16";
  v.push_back(s);
  KernelSpec k = adamw_spec("adamw_update_bf16_kahan", make_adamw_kahan, run_adamw_bf16_kahan);
  k.twin_seed = "";
  k.tolerances["m"] = k.tolerances["v"] = moment_tolerance();
  k.tolerances["wb16"] = b.tolerances["wb16"];
  k.tolerances["w"] = close(7.9e-3, 0,
                            "w is the widening of wb16: one bf16 step (at most 2^-7 of |w|) "
                            "where wb16 lands on its neighbour; a missed rounding leaves w's "
                            "low 16 bits set");
  k.tolerances["comp"] = close(7.9e-3, 1e-8,
                               "the twin's step δ may lie a few ulps from reftrain's (WGSL's ÷ "
                               "and √), an absolute 1e-5·lr that s − (w_new − w) keeps while "
                               "the difference itself may be far smaller (seen on an H200: 2 bf16 "
                               "ulps of one element), and then one bf16 step (2^-7 of it) where "
                               "it crosses a rounding boundary; a dropped compensation or a wrong "
                               "sign moves every element by about itself");
  k.numerics = bf16_numerics(false);
  k.numerics["kahan"] =
      "s = f32(comp) - delta; wb16 = bf16(w + s); comp = bf16(s - (f32(wb16) - w)); every "
      "operation a separate f32 rounding in this order, bf16(x) round to nearest even with "
      "bf16's subnormal and NaN rules";
  v.push_back(k);
  KernelSpec e = adamw_spec("adamw_8bit_update", make_adamw_8bit, run_adamw_8bit);
  const Tolerance codes = close(0, 1,
                                "one code step where a quotient lands on a rounding boundary; m "
                                "codes are int8 in two's complement (0 and −1 are 0x00 and 0xFF)");
  e.tolerances["m_packed"] = e.tolerances["v_packed"] = codes;
  e.tolerances["m_scale"] = e.tolerances["v_scale"] =
      ulps(2, "absmax/127 or √vmax/255 of moments that may differ by an ulp");
  v.push_back(e);
}

}  // namespace reftrain
