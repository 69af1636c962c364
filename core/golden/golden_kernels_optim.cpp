// Golden fixtures of the cast and optimizer kernels: their bindings are the WGSL bind groups of
// 08_cast.wgsl and 12_optimizer.wgsl, in order. The references are the plain-named kernels of
// ops/cast.h and optim/, which exist in float only (no float64 recomputation). The "nonfinite"
// case puts NaN and ±Inf into the gradients, which the kernels must drop; WGSL lets an
// implementation assume no NaN or Inf exist, so a WebGPU twin may skip that case.
#include <cmath>
#include <cstring>

#include "core/golden/golden_kernels.h"
#include "ops/cast.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"

namespace reftrain {

namespace {

using namespace fixture;

const char* const kSeed000 = "000_0d0944923f99234f.txt";
const char* const kSeed004 = "004_ebfe072bf2a522fd.txt";

// ---- casts -------------------------------------------------------------------------------

// Values each f32 → f16 rule must get right: saturation (65504 is the largest f16; 65520 would
// round to Inf without the clamp), ties to even (1 + 2^-11 → 1, 1 + 3·2^-11 → 1 + 2^-9), the
// subnormal range (2^-24 the smallest, 2^-25 the tie to 0), the smallest normal and ±0.
const float kCastSpecials[] = {0.0f,           -0.0f,       65504.0f, 65505.0f,     65520.0f,
                               -65520.0f,      1e6f,        -3e38f,   0x1p-24f,     0x1p-25f,
                               0x1.8p-25f,     -0x1p-24f,   0x1p-14f, 0x1.ffcp-15f, 1.00048828125f,
                               1.00146484375f, 0.33333334f, -2.0f,    0x1.004p0f};

Json make_cast_f32_to_f16(FixtureGen& g, const KernelDims& d) {
  // Magnitudes over 2^-28 .. 2^18: every f16 binade, the subnormals, and beyond the range.
  std::vector<float> x = g.draw_normal("src", size_t(d.n), 1.0);
  const std::vector<float> e = g.draw_uniform("exponent", size_t(d.n), -28.0, 18.0);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(x[i], int(std::floor(e[i])));
  std::copy(std::begin(kCastSpecials), std::end(kCastSpecials), x.begin());
  g.add("src", {d.n}, x);
  return {{"n", d.n}, {"clamp", 65504.0}, {"rounding", "nearest, ties to even"}};
}

void run_cast_f32_to_f16(FixtureIo<float>& io, const KernelDims& d) {
  const std::vector<float> src = io.get("src");
  std::vector<uint16_t> dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f32_to_f16_bits(src[i]);
  io.put_raw("dst", DType::kF16, {d.n}, dst.data());
}

Json make_cast_f16_to_f32(FixtureGen& g, const KernelDims& d) {
  // Every finite f16 is a candidate: bit patterns below 0x7C00 with either sign.
  const std::vector<int32_t> r = g.draw_below("src", size_t(d.n), 2 * 0x7C00);
  std::vector<uint16_t> h(r.size());
  for (size_t i = 0; i < r.size(); ++i) h[i] = uint16_t((r[i] & 1) << 15 | (r[i] >> 1));
  const uint16_t specials[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x3C00};
  std::copy(std::begin(specials), std::end(specials), h.begin());
  g.add_raw("src", DType::kF16, {d.n}, h.data());
  return {{"n", d.n}};
}

void run_cast_f16_to_f32(FixtureIo<float>& io, const KernelDims& d) {
  const std::vector<uint16_t> src = io.halves("src");
  std::vector<float> dst(src.size());
  for (size_t i = 0; i < src.size(); ++i) dst[i] = f16_bits_to_f32(src[i]);
  io.put("dst", {d.n}, dst);
}

// ---- gradient norm -----------------------------------------------------------------------

// Gradients: normal, 0.1 (small: its norm, ~2.3, is clipped to 1) or 0.01 (awkward: ~0.35, not
// clipped); the nonfinite case adds +Inf, NaN and −Inf, which every kernel here must skip.
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

// w, g, m, v and the uniforms; m and v zero at t = 1 (the first step), otherwise an Adam state.
// Returns the fp32 m and v drawn (for the 8-bit kernel to quantize).
std::pair<std::vector<float>, std::vector<float>> make_adamw_common(FixtureGen& g,
                                                                    const KernelDims& d,
                                                                    bool fp32_state) {
  const Step s = step_of(d);
  g.normal("w_in", {d.n}, 0.5);
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

Tolerance mirror_tolerance() {
  return ulps(1,
              "WGSL leaves the f32→f16 rounding to the implementation (either neighbour of a "
              "value between two f16s); 0 on a device that rounds to nearest even");
}

// A kernel with a fixed WGSL bind group: the entry point is the kernel's name, and it
// exists in float only.
KernelSpec seed_kernel(const std::string& name, std::string seed,
                       std::map<std::string, Tolerance> tolerances, std::vector<std::string> cases,
                       Json (*make)(FixtureGen&, const KernelDims&),
                       void (*run)(FixtureIo<float>&, const KernelDims&)) {
  KernelSpec k = record_kernel(name, Family::kBoth, make, run, nullptr);
  k.twin_seed = std::move(seed);
  k.tolerances = std::move(tolerances);
  k.cases = std::move(cases);
  return k;
}

KernelSpec adamw_spec(const std::string& name, Json (*make)(FixtureGen&, const KernelDims&),
                      void (*run)(FixtureIo<float>&, const KernelDims&)) {
  return seed_kernel(name, kSeed004, {{"w", weight_tolerance()}, {"g", zero_gradient()}},
                     {"small", "awkward", "nonfinite"}, make, run);
}

void add_cast_kernels(std::vector<KernelSpec>& v) {
  v.push_back(seed_kernel("cast_f32_to_f16", kSeed000, {{"dst", mirror_tolerance()}},
                          {"small", "awkward"}, make_cast_f32_to_f16, run_cast_f32_to_f16));
  v.push_back(seed_kernel("cast_f16_to_f32", kSeed000,
                          {{"dst", ulps(0, "every f16 is an f32: the widening is exact")}},
                          {"small", "awkward"}, make_cast_f16_to_f32, run_cast_f16_to_f32));
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

void add_adamw_kernels(std::vector<KernelSpec>& v) {
  KernelSpec a = adamw_spec("adamw_update", make_adamw, run_adamw);
  a.tolerances["m"] = a.tolerances["v"] = moment_tolerance();
  v.push_back(a);
  KernelSpec f = adamw_spec("adamw_update_f16", make_adamw, run_adamw_f16);
  f.tolerances["m"] = f.tolerances["v"] = moment_tolerance();
  f.tolerances["w16"] = mirror_tolerance();
  v.push_back(f);
  KernelSpec e = adamw_spec("adamw_8bit_update", make_adamw_8bit, run_adamw_8bit);
  const Tolerance codes = close(0, 1,
                                "one code step where a quotient lands on a rounding boundary; m "
                                "codes are int8 in two's complement (0 and −1 are 0x00 and 0xFF)");
  e.tolerances["m_packed"] = e.tolerances["v_packed"] = codes;
  e.tolerances["m_scale"] = e.tolerances["v_scale"] =
      ulps(2, "absmax/127 or √vmax/255 of moments that may differ by an ulp");
  v.push_back(e);
}

}  // namespace

void add_optim_kernels(std::vector<KernelSpec>& v) {
  add_cast_kernels(v);
  add_grad_norm_kernels(v);
  add_adamw_kernels(v);
}

}  // namespace reftrain
