// Causal multi-head attention, fused: the forward never materialises the probabilities. It walks
// the keys in tiles of TILE with an online softmax (a running max m and sum l, the output rescaled
// by e^(m_old − m_new) when the max grows) and keeps only the row's logsumexp lse = m + log l.
// The backward recomputes each probability from the logits and lse, p = e^(q·k/√hs − lse), and
// takes the softmax backward's row term from the forward's output, D_t = dout_t·out_t (equal to
// Σ_u p·dp). lse is [B, NH, T]; qkv's layout, the shared bindings and the index helpers are
// prelude/attention.wgsl's. One thread per (b, h, t).
//
// The fixtures hold the materialised forward's att and no lse, so the runner (registry.mjs,
// attentionForms.fused) binds lse as a scratch buffer of the twin's own and runs the backward
// as two passes: attention_forward_fused on the fixture's qkv, then attention_backward_fused.

// Small, so that the fixtures' 7 and 8 positions span two tiles (the second one partial at 7) and
// the rescaling between tiles is what they check; a real GPU would take 32 or 64 keys a tile.
const TILE: u32 = 4u;

@group(0) @binding(1) var<storage, read_write> ff_lse: array<f32>;

// The output row o (hs values) accumulates in af_out itself, which this thread alone writes.
@compute @workgroup_size(64)
fn attention_forward_fused(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= af_B * af_NH * af_T) { return; }
  let x = head_of(gid.x, af_T, af_C, af_NH);
  let t = gid.x % x.T;
  let q = qkv_at(x, t, 0u);
  let o = out_at(x, t);
  for (var i = 0u; i < x.hs; i++) { af_out[o + i] = 0.0; }
  var m = NEG_MAX;
  var l: f32 = 0.0;
  var s: array<f32, TILE>;
  for (var u0 = 0u; u0 <= t; u0 += TILE) {
    let n = min(TILE, t + 1u - u0);
    var mt = m;
    for (var j = 0u; j < n; j++) {
      let k = qkv_at(x, u0 + j, 1u);
      var d: f32 = 0.0;
      for (var i = 0u; i < x.hs; i++) { d += af_qkv[q + i] * af_qkv[k + i]; }
      s[j] = d * x.scale;
      mt = max(mt, s[j]);
    }
    let c = exp(m - mt);  // 0 on the first tile, 1 while the max holds
    l *= c;
    for (var j = 0u; j < n; j++) {
      s[j] = exp(s[j] - mt);
      l += s[j];
    }
    for (var i = 0u; i < x.hs; i++) {
      var acc = af_out[o + i] * c;
      for (var j = 0u; j < n; j++) { acc += s[j] * af_qkv[qkv_at(x, u0 + j, 2u) + i]; }
      af_out[o + i] = acc;
    }
    m = mt;
  }
  let inv = 1.0 / l;
  for (var i = 0u; i < x.hs; i++) { af_out[o + i] *= inv; }
  ff_lse[score_row(x, t)] = m + log(l);
}

@group(0) @binding(3) var<storage, read> fb_lse: array<f32>;
@group(0) @binding(8) var<storage, read> fb_out: array<f32>;

// p[t,u], recomputed from the logit and the row's logsumexp.
fn p_of(x: Head, t: u32, u: u32) -> f32 {
  let q = qkv_at(x, t, 0u);
  let k = qkv_at(x, u, 1u);
  var s: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) { s += ab_qkv[q + i] * ab_qkv[k + i]; }
  return exp(s * x.scale - fb_lse[score_row(x, t)]);
}

// ds[t,u] = p·(dp − D_t)·scale, with dp = dout_t·v_u and D_t = dout_t·out_t.
fn ds_of(x: Head, t: u32, u: u32, p: f32) -> f32 {
  let dy = out_at(x, t);
  let v = qkv_at(x, u, 2u);
  var dp: f32 = 0.0;
  var d: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) {
    dp += ab_dout[dy + i] * ab_qkv[v + i];
    d += ab_dout[dy + i] * fb_out[dy + i];
  }
  return p * (dp - d) * x.scale;
}

// Thread (b, h, s) gathers every contribution to position s, as attention.wgsl's backward does:
// dq[s] = Σ_{u≤s} ds[s,u]·k[u];  dk[s] = Σ_{t≥s} ds[t,s]·q[t];  dv[s] = Σ_{t≥s} p[t,s]·dout[t].
@compute @workgroup_size(64)
fn attention_backward_fused(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= ab_B * ab_NH * ab_T) { return; }
  let x = head_of(gid.x, ab_T, ab_C, ab_NH);
  let s = gid.x % x.T;
  let row = qkv_at(x, s, 0u);  // q of position s; k at +C, v at +2C
  for (var u = 0u; u <= s; u++) {
    let ds = ds_of(x, s, u, p_of(x, s, u));
    let k = qkv_at(x, u, 1u);
    for (var i = 0u; i < x.hs; i++) { ab_dqkv[row + i] += ds * ab_qkv[k + i]; }
  }
  for (var t = s; t < x.T; t++) {
    let p = p_of(x, t, s);
    let ds = ds_of(x, t, s, p);
    let q = qkv_at(x, t, 0u);
    let dy = out_at(x, t);
    for (var i = 0u; i < x.hs; i++) {
      ab_dqkv[row + x.C + i] += ds * ab_qkv[q + i];
      ab_dqkv[row + 2u * x.C + i] += p * ab_dout[dy + i];
    }
  }
}
