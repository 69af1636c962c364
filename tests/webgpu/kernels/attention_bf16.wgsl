// The attention in bf16 (ops/attention_bf16.h): the four products of each direction in the
// canonical bf16 order of ops/matmul_bf16.h (the template below, once per product), the softmax
// and its gradient in f32 as the CPU computes them; bf16 tensors two to a u32 word
// (prelude/bf16.wgsl). The products over keys run over all T positions, as the CPU's do (the
// masked probabilities and score gradients are exact zeros), so their blocking matches.
// Each pass binds B, T, C, NH first (uniforms 0..3), then its buffers:
//   forward:  attention_forward_bf16      4 att (f32), 5 qkv16      one thread per row (b, h, t):
//                                          S = Q·Kᵀ over u ≤ t, the softmax written to att
//             attention_round_bf16        4 att, 5 att16            one thread per word of att16
//             attention_forward_bf16_out  4 out, 5 att16, 6 qkv16   one thread per out element
//   backward: attention_backward_bf16     4 dp (scratch f32 [B,NH,T,T]), 5 dout16, 6 qkv16,
//                                          7 att: per row, dP = dOut·Vᵀ and ds = p·(dP − D)·scale
//             attention_round_bf16        4 dp, 5 ds16 (scratch)    the same rounding pass
//             attention_backward_bf16_dqkv 4 dqkv, 5 ds16, 6 qkv16, 7 att16, 8 dout16: one thread
//                                          per dqkv element, dQ, dK or dV by its column
// Between the CPU and this twin only exp differs (WGSL's is not simd/math.h's): att and out
// match within the bf16 tolerance, a probability now and then rounding to the neighbouring bf16.

@group(0) @binding(0) var<uniform> B: u32;
@group(0) @binding(1) var<uniform> T: u32;
@group(0) @binding(2) var<uniform> C: u32;
@group(0) @binding(3) var<uniform> NH: u32;

fn hs() -> u32 { return C / NH; }
// Element (b, t, c) of a [B, T, width] bf16 tensor's index.
fn at3(b: u32, t: u32, width: u32, c: u32) -> u32 { return (b * T + t) * width + c; }
// Element (b, h, t, u) of a [B, NH, T, T] tensor's index.
fn at4(b: u32, h: u32, t: u32, u: u32) -> u32 { return ((b * NH + h) * T + t) * T + u; }

@group(0) @binding(4) var<storage, read_write> fs_att: array<f32>;
@group(0) @binding(5) var<storage, read> fs_qkv16: array<u32>;

@group(0) @binding(4) var<storage, read_write> rd_f32: array<f32>;
@group(0) @binding(5) var<storage, read_write> rd_bf16: array<u32>;

@group(0) @binding(4) var<storage, read_write> fo_out: array<f32>;
@group(0) @binding(5) var<storage, read_write> fo_att16: array<u32>;
@group(0) @binding(6) var<storage, read> fo_qkv16: array<u32>;

@group(0) @binding(4) var<storage, read_write> bs_dp: array<f32>;
@group(0) @binding(5) var<storage, read> bs_dout16: array<u32>;
@group(0) @binding(6) var<storage, read> bs_qkv16: array<u32>;
@group(0) @binding(7) var<storage, read> bs_att: array<f32>;

@group(0) @binding(4) var<storage, read_write> bq_dqkv: array<f32>;
@group(0) @binding(5) var<storage, read_write> bq_ds16: array<u32>;
@group(0) @binding(6) var<storage, read> bq_qkv16: array<u32>;
@group(0) @binding(7) var<storage, read> bq_att16: array<u32>;
@group(0) @binding(8) var<storage, read> bq_dout16: array<u32>;

fn word(i: u32, w: u32) -> f32 { return bf16_unpack(w, i); }

// The products' operands, x = (b, h, row, column) of the output: X_A(x, r) · X_B(x, r) summed
// over r < X_R(), 0 past it.
// S[t,u] = Σ_i q[t,i]·k[u,i]              x = (b, h, t, u)
fn s_R() -> u32 { return hs(); }
fn s_A(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, x.z, 3u * C, x.y * hs() + r); return word(i, fs_qkv16[i >> 1u]); }
fn s_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, x.w, 3u * C, C + x.y * hs() + r); return word(i, fs_qkv16[i >> 1u]); }
// out[t,i] = Σ_u P[t,u]·v[u,i]             x = (b, h, t, i)
fn pv_R() -> u32 { return T; }
fn pv_A(x: vec4<u32>, r: u32) -> f32 { let i = at4(x.x, x.y, x.z, r); return word(i, fo_att16[i >> 1u]); }
fn pv_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, r, 3u * C, 2u * C + x.y * hs() + x.w); return word(i, fo_qkv16[i >> 1u]); }
// dP[t,u] = Σ_i dout[t,i]·v[u,i]          x = (b, h, t, u)
fn dp_R() -> u32 { return hs(); }
fn dp_A(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, x.z, C, x.y * hs() + r); return word(i, bs_dout16[i >> 1u]); }
fn dp_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, x.w, 3u * C, 2u * C + x.y * hs() + r); return word(i, bs_qkv16[i >> 1u]); }
// dQ[t,i] += Σ_u dS[t,u]·k[u,i]            x = (b, h, t, i)
fn dq_R() -> u32 { return T; }
fn dq_A(x: vec4<u32>, r: u32) -> f32 { let i = at4(x.x, x.y, x.z, r); return word(i, bq_ds16[i >> 1u]); }
fn dq_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, r, 3u * C, C + x.y * hs() + x.w); return word(i, bq_qkv16[i >> 1u]); }
// dK[u,i] += Σ_t dS[t,u]·q[t,i]            x = (b, h, u, i)
fn dk_R() -> u32 { return T; }
fn dk_A(x: vec4<u32>, r: u32) -> f32 { let i = at4(x.x, x.y, r, x.z); return word(i, bq_ds16[i >> 1u]); }
fn dk_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, r, 3u * C, x.y * hs() + x.w); return word(i, bq_qkv16[i >> 1u]); }
// dV[u,i] += Σ_t P[t,u]·dout[t,i]          x = (b, h, u, i)
fn dv_R() -> u32 { return T; }
fn dv_A(x: vec4<u32>, r: u32) -> f32 { let i = at4(x.x, x.y, r, x.z); return word(i, bq_att16[i >> 1u]); }
fn dv_B(x: vec4<u32>, r: u32) -> f32 { let i = at3(x.x, r, C, x.y * hs() + x.w); return word(i, bq_dout16[i >> 1u]); }

//#template
// init ⊕ Σ_r X_A·X_B in the canonical order (the padding's terms are +0·+0).
fn {{X}}_dot(x: vec4<u32>, init: f32) -> f32 {
  let R = {{X}}_R();
  var c = flush(init);
  for (var r0 = 0u; r0 < R; r0 += 32u) {
    var e = 0.0;
    var o = 0.0;
    for (var r = r0; r < r0 + 32u; r += 2u) {
      e = fma_flush(select(0.0, {{X}}_A(x, r), r < R), select(0.0, {{X}}_B(x, r), r < R), e);
      o = fma_flush(select(0.0, {{X}}_A(x, r + 1u), r + 1u < R), select(0.0, {{X}}_B(x, r + 1u), r + 1u < R), o);
    }
    c = add_flush(c, add_flush(e, o));
  }
  return c;
}
//#end

// The 16 lanes of a sum in reftrain's fixed order (simd/reduce.h) combined: lane l with l + 8,
// then l + 4, l + 2, l + 1. Lane l holds the fold of elements l, l + 16, … of the full blocks of
// 16; the caller folds the leftover elements into the result one by one, in order.
fn lanes_sum(lanes_in: array<f32, 16>) -> f32 {
  var lanes = lanes_in;
  for (var half = 8u; half > 0u; half = half / 2u) {
    for (var l = 0u; l < half; l++) { lanes[l] = lanes[l] + lanes[l + half]; }
  }
  return lanes[0];
}

// Row (b, h, t): att[t, u] = softmax over u ≤ t of S[t, u]·scale, 0 past t (ops/attention_bf16's
// softmax_row: scale, max, exp, Σ in the 16-lane order, times 1/Σ).
@compute @workgroup_size(64)
fn attention_forward_bf16(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= B * NH * T) { return; }
  let t = row % T;
  let b = row / (NH * T);
  let h = (row / T) % NH;
  let base = row * T;
  let scale = 1.0 / sqrt(f32(hs()));
  var maxv = -0x1.fffffep+127f;  // the lowest f32: every row has u = 0
  for (var u = 0u; u <= t; u++) {
    let s = s_dot(vec4<u32>(b, h, t, u), 0.0) * scale;
    fs_att[base + u] = s;
    maxv = max(maxv, s);
  }
  let full = (t + 1u) / 16u * 16u;
  var lanes: array<f32, 16>;
  for (var u = 0u; u <= t; u++) {
    let p = exp(fs_att[base + u] - maxv);
    fs_att[base + u] = p;
    if (u < full) { lanes[u % 16u] += p; }
  }
  var sum = lanes_sum(lanes);
  for (var u = full; u <= t; u++) { sum += fs_att[base + u]; }
  let inv = 1.0 / sum;
  for (var u = 0u; u < T; u++) { fs_att[base + u] = select(0.0, fs_att[base + u] * inv, u <= t); }
}

// Word j of the bf16 copy of a [B, NH, T, T] f32 tensor (att → att16, dp → ds16).
@compute @workgroup_size(256)
fn attention_round_bf16(@builtin(global_invocation_id) gid: vec3<u32>,
                        @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = flat_id(gid, nwg);
  let n = B * NH * T * T;
  if (2u * j >= n) { return; }
  rd_bf16[j] = bf16_pack(rd_f32[2u * j], select(0.0, rd_f32[min(2u * j + 1u, n - 1u)], 2u * j + 1u < n));
}

// out[b, t, h·hs + i] = P·V over all T keys.
@compute @workgroup_size(256)
fn attention_forward_bf16_out(@builtin(global_invocation_id) gid: vec3<u32>,
                              @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = flat_id(gid, nwg);
  if (e >= B * T * C) { return; }
  let c = e % C;
  let bt = e / C;
  fo_out[e] = pv_dot(vec4<u32>(bt / T, c / hs(), bt % T, c % hs()), 0.0);
}

// Row (b, h, t): dP over u ≤ t, D = Σ_u p·dP (the 16-lane order), ds = p·(dP − D)·scale, 0
// past t.
@compute @workgroup_size(64)
fn attention_backward_bf16(@builtin(global_invocation_id) gid: vec3<u32>) {
  let row = gid.x;
  if (row >= B * NH * T) { return; }
  let t = row % T;
  let b = row / (NH * T);
  let h = (row / T) % NH;
  let base = row * T;
  let scale = 1.0 / sqrt(f32(hs()));
  let full = (t + 1u) / 16u * 16u;
  var lanes: array<f32, 16>;
  for (var u = 0u; u <= t; u++) {
    let dp = dp_dot(vec4<u32>(b, h, t, u), 0.0);
    bs_dp[base + u] = dp;
    if (u < full) { lanes[u % 16u] += bs_att[base + u] * dp; }
  }
  var D = lanes_sum(lanes);
  for (var u = full; u <= t; u++) { D += bs_att[base + u] * bs_dp[base + u]; }
  for (var u = 0u; u < T; u++) {
    bs_dp[base + u] = select(0.0, bs_att[base + u] * (bs_dp[base + u] - D) * scale, u <= t);
  }
}

// dqkv[b, t, c3] += dQ, dK or dV: the column's third of 3C picks which.
@compute @workgroup_size(256)
fn attention_backward_bf16_dqkv(@builtin(global_invocation_id) gid: vec3<u32>,
                                @builtin(num_workgroups) nwg: vec3<u32>) {
  let e = flat_id(gid, nwg);
  if (e >= B * T * 3u * C) { return; }
  let c3 = e % (3u * C);
  let bt = e / (3u * C);
  let c = c3 % C;
  let x = vec4<u32>(bt / T, c / hs(), bt % T, c % hs());
  let init = bq_dqkv[e];
  if (c3 < C) {
    bq_dqkv[e] = dq_dot(x, init);
  } else if (c3 < 2u * C) {
    bq_dqkv[e] = dk_dot(x, init);
  } else {
    bq_dqkv[e] = dv_dot(x, init);
  }
}
