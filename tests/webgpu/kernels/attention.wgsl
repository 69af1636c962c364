// Causal multi-head attention with the probabilities materialised, forward and backward. qkv is
// [B, T, 3C] (q, k, v of head h at channels h·hs.. of each third), att [B, NH, T, T] (0 above the
// diagonal), scale 1/√hs. Bindings in the fixture's order, B, T, C, NH as u32 uniforms (the
// backward's dp_scratch is CPU working memory and not bound). One thread per (b, h, t).

@group(0) @binding(0) var<storage, read_write> af_out: array<f32>;
@group(0) @binding(1) var<storage, read_write> af_att: array<f32>;
@group(0) @binding(2) var<storage, read> af_qkv: array<f32>;
@group(0) @binding(3) var<uniform> af_B: u32;
@group(0) @binding(4) var<uniform> af_T: u32;
@group(0) @binding(5) var<uniform> af_C: u32;
@group(0) @binding(6) var<uniform> af_NH: u32;

@compute @workgroup_size(64)
fn attention_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = af_T;
  let C = af_C;
  let NH = af_NH;
  let hs = C / NH;
  if (gid.x >= af_B * NH * T) { return; }
  let t = gid.x % T;
  let h = (gid.x / T) % NH;
  let b = gid.x / (T * NH);
  let scale = 1.0 / sqrt(f32(hs));
  let q = (b * T + t) * 3u * C + h * hs;
  let p = ((b * NH + h) * T + t) * T;  // this row of att, used as the scores' scratch
  var maxv = -0x1.fffffep+127f;
  for (var u = 0u; u <= t; u++) {
    let k = (b * T + u) * 3u * C + C + h * hs;
    var s: f32 = 0.0;
    for (var i = 0u; i < hs; i++) { s += af_qkv[q + i] * af_qkv[k + i]; }
    af_att[p + u] = s * scale;
    maxv = max(maxv, s * scale);
  }
  var sum: f32 = 0.0;
  for (var u = 0u; u <= t; u++) {
    let e = exp(af_att[p + u] - maxv);
    af_att[p + u] = e;
    sum += e;
  }
  let inv = 1.0 / sum;
  for (var u = 0u; u <= t; u++) { af_att[p + u] *= inv; }
  for (var u = t + 1u; u < T; u++) { af_att[p + u] = 0.0; }
  let o = (b * T + t) * C + h * hs;
  for (var i = 0u; i < hs; i++) {
    var acc: f32 = 0.0;
    for (var u = 0u; u <= t; u++) { acc += af_att[p + u] * af_qkv[(b * T + u) * 3u * C + 2u * C + h * hs + i]; }
    af_out[o + i] = acc;
  }
}

@group(0) @binding(0) var<storage, read_write> ab_dqkv: array<f32>;
@group(0) @binding(1) var<storage, read> ab_dout: array<f32>;
@group(0) @binding(2) var<storage, read> ab_qkv: array<f32>;
@group(0) @binding(3) var<storage, read> ab_att: array<f32>;
@group(0) @binding(4) var<uniform> ab_B: u32;
@group(0) @binding(5) var<uniform> ab_T: u32;
@group(0) @binding(6) var<uniform> ab_C: u32;
@group(0) @binding(7) var<uniform> ab_NH: u32;

struct Head { b: u32, h: u32, T: u32, C: u32, NH: u32, hs: u32 }

// dp[t,u] = dout[t]·v[u] for head (b, h).
fn dp_of(x: Head, t: u32, u: u32) -> f32 {
  let dy = (x.b * x.T + t) * x.C + x.h * x.hs;
  let v = (x.b * x.T + u) * 3u * x.C + 2u * x.C + x.h * x.hs;
  var s: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) { s += ab_dout[dy + i] * ab_qkv[v + i]; }
  return s;
}

fn att_of(x: Head, t: u32, u: u32) -> f32 {
  return ab_att[((x.b * x.NH + x.h) * x.T + t) * x.T + u];
}

// Σ_u p[t,u]·dp[t,u]: the softmax backward's row term.
fn dot_of(x: Head, t: u32) -> f32 {
  var d: f32 = 0.0;
  for (var u = 0u; u <= t; u++) { d += att_of(x, t, u) * dp_of(x, t, u); }
  return d;
}

// Thread (b, h, s) gathers every contribution to position s, so no two threads write the same
// element: dq[s] = Σ_{u≤s} ds[s,u]·k[u];  dk[s] = Σ_{t≥s} ds[t,s]·q[t];  dv[s] = Σ_{t≥s} p[t,s]·dout[t],
// with ds[t,u] = p[t,u]·(dp[t,u] − dot_t)·scale.
@compute @workgroup_size(64)
fn attention_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = ab_T;
  let NH = ab_NH;
  if (gid.x >= ab_B * NH * T) { return; }
  let x = Head(gid.x / (T * NH), (gid.x / T) % NH, T, ab_C, NH, ab_C / NH);
  let s = gid.x % T;
  let scale = 1.0 / sqrt(f32(x.hs));
  let row = (x.b * T + s) * 3u * x.C + x.h * x.hs;  // q of position s; k at +C, v at +2C
  let dot_s = dot_of(x, s);
  for (var u = 0u; u <= s; u++) {
    let ds = att_of(x, s, u) * (dp_of(x, s, u) - dot_s) * scale;
    let k = (x.b * T + u) * 3u * x.C + x.C + x.h * x.hs;
    for (var i = 0u; i < x.hs; i++) { ab_dqkv[row + i] += ds * ab_qkv[k + i]; }
  }
  for (var t = s; t < T; t++) {
    let p = att_of(x, t, s);
    let ds = p * (dp_of(x, t, s) - dot_of(x, t)) * scale;
    let q = (x.b * T + t) * 3u * x.C + x.h * x.hs;
    let dy = (x.b * T + t) * x.C + x.h * x.hs;
    for (var i = 0u; i < x.hs; i++) {
      ab_dqkv[row + x.C + i] += ds * ab_qkv[q + i];
      ab_dqkv[row + 2u * x.C + i] += p * ab_dout[dy + i];
    }
  }
}
