// Causal multi-head attention, fused: the forward never materialises the probabilities. It walks
// the keys in tiles of TILE with an online softmax (a running max m and sum l, the output rescaled
// by e^(m_old − m_new) when the max grows) and keeps only the row's logsumexp lse = m + log l.
// The backward recomputes each probability from the logits and lse, p = e^(q·k/√hs − lse), and
// takes the softmax backward's row term from the forward's output, D_t = dout_t·out_t (equal to
// Σ_u p·dp). qkv is [B, T, 3C] as in attention.wgsl, lse [B, NH, T]. One thread per (b, h, t).
//
// The fixtures hold the materialised forward's att and no lse, so the runner (registry.mjs,
// attentionForms.fused) binds lse as a scratch buffer of the twin's own and runs the backward
// as two passes: attention_forward_fused on the fixture's qkv, then attention_backward_fused.

// Small, so that the fixtures' 7 and 8 positions span two tiles (the second one partial at 7) and
// the rescaling between tiles is what they check; a real GPU would take 32 or 64 keys a tile.
const TILE: u32 = 4u;
const NEG_MAX: f32 = -0x1.fffffep+127f;

@group(0) @binding(0) var<storage, read_write> ff_out: array<f32>;
@group(0) @binding(1) var<storage, read_write> ff_lse: array<f32>;
@group(0) @binding(2) var<storage, read> ff_qkv: array<f32>;
@group(0) @binding(3) var<uniform> ff_B: u32;
@group(0) @binding(4) var<uniform> ff_T: u32;
@group(0) @binding(5) var<uniform> ff_C: u32;
@group(0) @binding(6) var<uniform> ff_NH: u32;

// The output row o (hs values) accumulates in ff_out itself, which this thread alone writes.
@compute @workgroup_size(64)
fn attention_forward_fused(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = ff_T;
  let C = ff_C;
  let NH = ff_NH;
  let hs = C / NH;
  if (gid.x >= ff_B * NH * T) { return; }
  let t = gid.x % T;
  let h = (gid.x / T) % NH;
  let b = gid.x / (T * NH);
  let scale = 1.0 / sqrt(f32(hs));
  let q = (b * T + t) * 3u * C + h * hs;
  let o = (b * T + t) * C + h * hs;
  for (var i = 0u; i < hs; i++) { ff_out[o + i] = 0.0; }
  var m = NEG_MAX;
  var l: f32 = 0.0;
  var s: array<f32, TILE>;
  for (var u0 = 0u; u0 <= t; u0 += TILE) {
    let n = min(TILE, t + 1u - u0);
    var mt = m;
    for (var j = 0u; j < n; j++) {
      let k = (b * T + u0 + j) * 3u * C + C + h * hs;
      var d: f32 = 0.0;
      for (var i = 0u; i < hs; i++) { d += ff_qkv[q + i] * ff_qkv[k + i]; }
      s[j] = d * scale;
      mt = max(mt, s[j]);
    }
    let c = exp(m - mt);  // 0 on the first tile, 1 while the max holds
    l *= c;
    for (var j = 0u; j < n; j++) {
      s[j] = exp(s[j] - mt);
      l += s[j];
    }
    for (var i = 0u; i < hs; i++) {
      var acc = ff_out[o + i] * c;
      for (var j = 0u; j < n; j++) { acc += s[j] * ff_qkv[(b * T + u0 + j) * 3u * C + 2u * C + h * hs + i]; }
      ff_out[o + i] = acc;
    }
    m = mt;
  }
  let inv = 1.0 / l;
  for (var i = 0u; i < hs; i++) { ff_out[o + i] *= inv; }
  ff_lse[gid.x] = m + log(l);
}

@group(0) @binding(0) var<storage, read_write> fb_dqkv: array<f32>;
@group(0) @binding(1) var<storage, read> fb_dout: array<f32>;
@group(0) @binding(2) var<storage, read> fb_qkv: array<f32>;
@group(0) @binding(3) var<storage, read> fb_out: array<f32>;
@group(0) @binding(4) var<storage, read> fb_lse: array<f32>;
@group(0) @binding(5) var<uniform> fb_B: u32;
@group(0) @binding(6) var<uniform> fb_T: u32;
@group(0) @binding(7) var<uniform> fb_C: u32;
@group(0) @binding(8) var<uniform> fb_NH: u32;

struct Head { b: u32, h: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32 }

fn qkv_at(x: Head, t: u32, part: u32) -> u32 {
  return (x.b * x.T + t) * 3u * x.C + part * x.C + x.h * x.hs;
}

fn row_of(x: Head, t: u32) -> u32 {
  return (x.b * x.T + t) * x.C + x.h * x.hs;
}

// p[t,u], recomputed from the logit and the row's logsumexp.
fn p_of(x: Head, t: u32, u: u32) -> f32 {
  let q = qkv_at(x, t, 0u);
  let k = qkv_at(x, u, 1u);
  var s: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) { s += fb_qkv[q + i] * fb_qkv[k + i]; }
  return exp(s * x.scale - fb_lse[(x.b * x.NH + x.h) * x.T + t]);
}

// ds[t,u] = p·(dp − D_t)·scale, with dp = dout_t·v_u and D_t = dout_t·out_t.
fn ds_of(x: Head, t: u32, u: u32, p: f32) -> f32 {
  let dy = row_of(x, t);
  let v = qkv_at(x, u, 2u);
  var dp: f32 = 0.0;
  var d: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) {
    dp += fb_dout[dy + i] * fb_qkv[v + i];
    d += fb_dout[dy + i] * fb_out[dy + i];
  }
  return p * (dp - d) * x.scale;
}

// Thread (b, h, s) gathers every contribution to position s, as attention.wgsl's backward does:
// dq[s] = Σ_{u≤s} ds[s,u]·k[u];  dk[s] = Σ_{t≥s} ds[t,s]·q[t];  dv[s] = Σ_{t≥s} p[t,s]·dout[t].
@compute @workgroup_size(64)
fn attention_backward_fused(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = fb_T;
  let NH = fb_NH;
  if (gid.x >= fb_B * NH * T) { return; }
  let hs = fb_C / NH;
  let x = Head(gid.x / (T * NH), (gid.x / T) % NH, T, fb_C, NH, hs, 1.0 / sqrt(f32(hs)));
  let s = gid.x % T;
  let row = qkv_at(x, s, 0u);  // q of position s; k at +C, v at +2C
  for (var u = 0u; u <= s; u++) {
    let ds = ds_of(x, s, u, p_of(x, s, u));
    let k = qkv_at(x, u, 1u);
    for (var i = 0u; i < hs; i++) { fb_dqkv[row + i] += ds * fb_qkv[k + i]; }
  }
  for (var t = s; t < T; t++) {
    let p = p_of(x, t, s);
    let ds = ds_of(x, t, s, p);
    let q = qkv_at(x, t, 0u);
    let dy = row_of(x, t);
    for (var i = 0u; i < hs; i++) {
      fb_dqkv[row + x.C + i] += ds * fb_qkv[q + i];
      fb_dqkv[row + 2u * x.C + i] += p * fb_dout[dy + i];
    }
  }
}
