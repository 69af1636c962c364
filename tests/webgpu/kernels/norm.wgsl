// LayerNorm and RMSNorm (eps 1e-5, biased variance), forward and backward. Bindings in the
// fixture's order, sizes N and C as u32 uniforms. One thread per row for the row-wise parts;
// the backward kernels also give thread c the weight gradient of column c (a sum over rows), so
// one dispatch of max(N, C) threads does both. Gradients accumulate (+=).
const EPS: f32 = 1e-5;

@group(0) @binding(0) var<storage, read_write> lnf_out: array<f32>;
@group(0) @binding(1) var<storage, read_write> lnf_mean: array<f32>;
@group(0) @binding(2) var<storage, read_write> lnf_rstd: array<f32>;
@group(0) @binding(3) var<storage, read> lnf_x: array<f32>;
@group(0) @binding(4) var<storage, read> lnf_w: array<f32>;
@group(0) @binding(5) var<storage, read> lnf_b: array<f32>;
@group(0) @binding(6) var<uniform> lnf_N: u32;
@group(0) @binding(7) var<uniform> lnf_C: u32;

@compute @workgroup_size(64)
fn layernorm_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= lnf_N) { return; }
  let C = lnf_C;
  let base = i * C;
  var sum: f32 = 0.0;
  for (var c = 0u; c < C; c++) { sum += lnf_x[base + c]; }
  let m = sum / f32(C);
  var sq: f32 = 0.0;
  for (var c = 0u; c < C; c++) { let d = lnf_x[base + c] - m; sq += d * d; }
  let s = 1.0 / sqrt(sq / f32(C) + EPS);
  for (var c = 0u; c < C; c++) { lnf_out[base + c] = (lnf_x[base + c] - m) * s * lnf_w[c] + lnf_b[c]; }
  lnf_mean[i] = m;
  lnf_rstd[i] = s;
}

@group(0) @binding(0) var<storage, read_write> lnb_dx: array<f32>;
@group(0) @binding(1) var<storage, read_write> lnb_dw: array<f32>;
@group(0) @binding(2) var<storage, read_write> lnb_db: array<f32>;
@group(0) @binding(3) var<storage, read> lnb_dout: array<f32>;
@group(0) @binding(4) var<storage, read> lnb_x: array<f32>;
@group(0) @binding(5) var<storage, read> lnb_w: array<f32>;
@group(0) @binding(6) var<storage, read> lnb_mean: array<f32>;
@group(0) @binding(7) var<storage, read> lnb_rstd: array<f32>;
@group(0) @binding(8) var<uniform> lnb_N: u32;
@group(0) @binding(9) var<uniform> lnb_C: u32;

@compute @workgroup_size(64)
fn layernorm_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let N = lnb_N;
  let C = lnb_C;
  let i = gid.x;
  if (i < N) {
    let base = i * C;
    let m = lnb_mean[i];
    let s = lnb_rstd[i];
    var dn_mean: f32 = 0.0;
    var dn_n_mean: f32 = 0.0;
    for (var c = 0u; c < C; c++) {
      let n = (lnb_x[base + c] - m) * s;
      let dn = lnb_dout[base + c] * lnb_w[c];
      dn_mean += dn;
      dn_n_mean += dn * n;
    }
    dn_mean /= f32(C);
    dn_n_mean /= f32(C);
    for (var c = 0u; c < C; c++) {
      let n = (lnb_x[base + c] - m) * s;
      let dn = lnb_dout[base + c] * lnb_w[c];
      lnb_dx[base + c] += (dn - dn_mean - n * dn_n_mean) * s;
    }
  }
  let c = gid.x;
  if (c < C) {
    var sw: f32 = 0.0;
    var sb: f32 = 0.0;
    for (var r = 0u; r < N; r++) {
      let g = lnb_dout[r * C + c];
      sw += g * ((lnb_x[r * C + c] - lnb_mean[r]) * lnb_rstd[r]);
      sb += g;
    }
    lnb_dw[c] += sw;
    lnb_db[c] += sb;
  }
}

@group(0) @binding(0) var<storage, read_write> rmf_out: array<f32>;
@group(0) @binding(1) var<storage, read_write> rmf_rstd: array<f32>;
@group(0) @binding(2) var<storage, read> rmf_x: array<f32>;
@group(0) @binding(3) var<storage, read> rmf_w: array<f32>;
@group(0) @binding(4) var<uniform> rmf_N: u32;
@group(0) @binding(5) var<uniform> rmf_C: u32;

@compute @workgroup_size(64)
fn rmsnorm_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= rmf_N) { return; }
  let C = rmf_C;
  let base = i * C;
  var sq: f32 = 0.0;
  for (var c = 0u; c < C; c++) { let v = rmf_x[base + c]; sq += v * v; }
  let s = 1.0 / sqrt(sq / f32(C) + EPS);
  for (var c = 0u; c < C; c++) { rmf_out[base + c] = rmf_x[base + c] * s * rmf_w[c]; }
  rmf_rstd[i] = s;
}

@group(0) @binding(0) var<storage, read_write> rmb_dx: array<f32>;
@group(0) @binding(1) var<storage, read_write> rmb_dw: array<f32>;
@group(0) @binding(2) var<storage, read> rmb_dout: array<f32>;
@group(0) @binding(3) var<storage, read> rmb_x: array<f32>;
@group(0) @binding(4) var<storage, read> rmb_w: array<f32>;
@group(0) @binding(5) var<storage, read> rmb_rstd: array<f32>;
@group(0) @binding(6) var<uniform> rmb_N: u32;
@group(0) @binding(7) var<uniform> rmb_C: u32;

@compute @workgroup_size(64)
fn rmsnorm_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let N = rmb_N;
  let C = rmb_C;
  let i = gid.x;
  if (i < N) {
    let base = i * C;
    let s = rmb_rstd[i];
    var dn_n_mean: f32 = 0.0;
    for (var c = 0u; c < C; c++) {
      dn_n_mean += rmb_dout[base + c] * rmb_w[c] * (rmb_x[base + c] * s);
    }
    dn_n_mean /= f32(C);
    for (var c = 0u; c < C; c++) {
      let n = rmb_x[base + c] * s;
      rmb_dx[base + c] += (rmb_dout[base + c] * rmb_w[c] - n * dn_n_mean) * s;
    }
  }
  let c = gid.x;
  if (c < C) {
    var sw: f32 = 0.0;
    for (var r = 0u; r < N; r++) { sw += rmb_dout[r * C + c] * (rmb_x[r * C + c] * rmb_rstd[r]); }
    rmb_dw[c] += sw;
  }
}
