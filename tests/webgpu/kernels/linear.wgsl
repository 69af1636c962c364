// The linear products, naive form (one thread per output element, the inner sum in k order):
//   linear_forward(_f16)        out[n,o] = Σ_k inp[n,k]·w[o,k] + b[o]      (w: f32 or f16)
//   linear_backward_data(_f16)  dinp[n,k] += Σ_o dout[n,o]·w[o,k]
//   linear_backward_weight      dw[o,k] += Σ_n dout[n,o]·inp[n,k];  db[o] += Σ_n dout[n,o]
// Bindings in the fixture's order, N, K, O as u32 uniforms. linear_tiled.wgsl and
// linear_reg4x4.wgsl hold the 16×16-tile and 4×4 register-blocked forms of linear_forward.
enable f16;

@group(0) @binding(0) var<storage, read_write> lf_out: array<f32>;
@group(0) @binding(1) var<storage, read> lf_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lf_w: array<f32>;
@group(0) @binding(3) var<storage, read> lf_b: array<f32>;
@group(0) @binding(4) var<uniform> lf_N: u32;
@group(0) @binding(5) var<uniform> lf_K: u32;
@group(0) @binding(6) var<uniform> lf_O: u32;

@compute @workgroup_size(16, 16)
fn linear_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let o = gid.x;
  let n = gid.y;
  if (o >= lf_O || n >= lf_N) { return; }
  let K = lf_K;
  var acc: f32 = 0.0;
  for (var k = 0u; k < K; k++) { acc += lf_inp[n * K + k] * lf_w[o * K + k]; }
  lf_out[n * lf_O + o] = acc + lf_b[o];
}

@group(0) @binding(0) var<storage, read_write> lh_out: array<f32>;
@group(0) @binding(1) var<storage, read> lh_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lh_w16: array<f16>;
@group(0) @binding(3) var<storage, read> lh_b: array<f32>;
@group(0) @binding(4) var<uniform> lh_N: u32;
@group(0) @binding(5) var<uniform> lh_K: u32;
@group(0) @binding(6) var<uniform> lh_O: u32;

// The fp16 weight mirror widened to f32 as it is read; the arithmetic stays f32.
@compute @workgroup_size(16, 16)
fn linear_forward_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
  let o = gid.x;
  let n = gid.y;
  if (o >= lh_O || n >= lh_N) { return; }
  let K = lh_K;
  var acc: f32 = 0.0;
  for (var k = 0u; k < K; k++) { acc += lh_inp[n * K + k] * f32(lh_w16[o * K + k]); }
  lh_out[n * lh_O + o] = acc + lh_b[o];
}

@group(0) @binding(0) var<storage, read_write> bd_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bd_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bd_w: array<f32>;
@group(0) @binding(3) var<uniform> bd_N: u32;
@group(0) @binding(4) var<uniform> bd_K: u32;
@group(0) @binding(5) var<uniform> bd_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data(@builtin(global_invocation_id) gid: vec3<u32>) {
  let k = gid.x;
  let n = gid.y;
  let K = bd_K;
  let O = bd_O;
  if (k >= K || n >= bd_N) { return; }
  var acc: f32 = 0.0;
  for (var o = 0u; o < O; o++) { acc += bd_dout[n * O + o] * bd_w[o * K + k]; }
  bd_dinp[n * K + k] += acc;
}

@group(0) @binding(0) var<storage, read_write> bh_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bh_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bh_w16: array<f16>;
@group(0) @binding(3) var<uniform> bh_N: u32;
@group(0) @binding(4) var<uniform> bh_K: u32;
@group(0) @binding(5) var<uniform> bh_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data_f16(@builtin(global_invocation_id) gid: vec3<u32>) {
  let k = gid.x;
  let n = gid.y;
  let K = bh_K;
  let O = bh_O;
  if (k >= K || n >= bh_N) { return; }
  var acc: f32 = 0.0;
  for (var o = 0u; o < O; o++) { acc += bh_dout[n * O + o] * f32(bh_w16[o * K + k]); }
  bh_dinp[n * K + k] += acc;
}

@group(0) @binding(0) var<storage, read_write> bw_dw: array<f32>;
@group(0) @binding(1) var<storage, read_write> bw_db: array<f32>;
@group(0) @binding(2) var<storage, read> bw_dout: array<f32>;
@group(0) @binding(3) var<storage, read> bw_inp: array<f32>;
@group(0) @binding(4) var<uniform> bw_N: u32;
@group(0) @binding(5) var<uniform> bw_K: u32;
@group(0) @binding(6) var<uniform> bw_O: u32;

// Thread (k, o): dw[o,k]; the threads of column k = 0 also sum db[o].
@compute @workgroup_size(16, 16)
fn linear_backward_weight(@builtin(global_invocation_id) gid: vec3<u32>) {
  let k = gid.x;
  let o = gid.y;
  let N = bw_N;
  let K = bw_K;
  let O = bw_O;
  if (k >= K || o >= O) { return; }
  var acc: f32 = 0.0;
  for (var n = 0u; n < N; n++) { acc += bw_dout[n * O + o] * bw_inp[n * K + k]; }
  bw_dw[o * K + k] += acc;
  if (k == 0u) {
    var s: f32 = 0.0;
    for (var n = 0u; n < N; n++) { s += bw_dout[n * O + o]; }
    bw_db[o] += s;
  }
}
