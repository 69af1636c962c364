// Causal multi-head attention with the probabilities materialised, forward and backward. att is
// [B, NH, T, T] (0 above the diagonal); qkv's layout, the shared bindings and the index helpers
// are prelude/attention.wgsl's. Bindings in the fixture's order, B, T, C, NH as u32 uniforms (the
// backward's dp_scratch is CPU working memory and not bound). One thread per (b, h, t).

@group(0) @binding(1) var<storage, read_write> af_att: array<f32>;

@compute @workgroup_size(64)
fn attention_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= af_B * af_NH * af_T) { return; }
  let x = head_of(gid.x, af_T, af_C, af_NH);
  let t = gid.x % x.T;
  let q = qkv_at(x, t, 0u);
  let p = score_row(x, t) * x.T;  // this row of att, used as the scores' scratch
  var maxv = NEG_MAX;
  for (var u = 0u; u <= t; u++) {
    let k = qkv_at(x, u, 1u);
    var s: f32 = 0.0;
    for (var i = 0u; i < x.hs; i++) { s += af_qkv[q + i] * af_qkv[k + i]; }
    af_att[p + u] = s * x.scale;
    maxv = max(maxv, s * x.scale);
  }
  var sum: f32 = 0.0;
  for (var u = 0u; u <= t; u++) {
    let e = exp(af_att[p + u] - maxv);
    af_att[p + u] = e;
    sum += e;
  }
  let inv = 1.0 / sum;
  for (var u = 0u; u <= t; u++) { af_att[p + u] *= inv; }
  for (var u = t + 1u; u < x.T; u++) { af_att[p + u] = 0.0; }
  let o = out_at(x, t);
  for (var i = 0u; i < x.hs; i++) {
    var acc: f32 = 0.0;
    for (var u = 0u; u <= t; u++) { acc += af_att[p + u] * af_qkv[qkv_at(x, u, 2u) + i]; }
    af_out[o + i] = acc;
  }
}

@group(0) @binding(3) var<storage, read> ab_att: array<f32>;

// dp[t,u] = dout[t]·v[u] for head (b, h).
fn dp_of(x: Head, t: u32, u: u32) -> f32 {
  let dy = out_at(x, t);
  let v = qkv_at(x, u, 2u);
  var s: f32 = 0.0;
  for (var i = 0u; i < x.hs; i++) { s += ab_dout[dy + i] * ab_qkv[v + i]; }
  return s;
}

fn att_of(x: Head, t: u32, u: u32) -> f32 {
  return ab_att[score_row(x, t) * x.T + u];
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
  if (gid.x >= ab_B * ab_NH * ab_T) { return; }
  let x = head_of(gid.x, ab_T, ab_C, ab_NH);
  let s = gid.x % x.T;
  let row = qkv_at(x, s, 0u);  // q of position s; k at +C, v at +2C
  let dot_s = dot_of(x, s);
  for (var u = 0u; u <= s; u++) {
    let ds = att_of(x, s, u) * (dp_of(x, s, u) - dot_s) * x.scale;
    let k = qkv_at(x, u, 1u);
    for (var i = 0u; i < x.hs; i++) { ab_dqkv[row + i] += ds * ab_qkv[k + i]; }
  }
  for (var t = s; t < x.T; t++) {
    let p = att_of(x, t, s);
    let ds = p * (dp_of(x, t, s) - dot_of(x, t)) * x.scale;
    let q = qkv_at(x, t, 0u);
    let dy = out_at(x, t);
    for (var i = 0u; i < x.hs; i++) {
      ab_dqkv[row + x.C + i] += ds * ab_qkv[q + i];
      ab_dqkv[row + 2u * x.C + i] += p * ab_dout[dy + i];
    }
  }
}
