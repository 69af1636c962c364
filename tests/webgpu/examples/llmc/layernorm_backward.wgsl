// llm.c's layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, B, T, C).
// With norm = (x - mean)·rstd and dnorm = weight·dout, per row:
//   dinp += rstd·(dnorm - mean(dnorm) - norm·mean(dnorm·norm))
// and over all rows: dweight += Σ norm·dout, dbias += Σ dout. Every gradient accumulates (+=),
// as llm.c's do. Conventions: storage read_write, sizes in `Params` bound last.
// llm.c's CUDA kernel reduces dweight and dbias with atomicAdd; WGSL has no float atomics, so
// one dispatch of max(B·T, C) threads gives thread r the dinp of row r and thread c the column
// sums of channel c (rows in order): no two threads write one element.

struct Params {
  B: u32,
  T: u32,
  C: u32,
}

@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(1) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(2) var<storage, read_write> dbias: array<f32>;
@group(0) @binding(3) var<storage, read_write> dout: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> weight: array<f32>;
@group(0) @binding(6) var<storage, read_write> mean: array<f32>;
@group(0) @binding(7) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(8) var<uniform> params: Params;

@compute @workgroup_size(256)
fn layernorm_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let BT = params.B * params.T;
  let C = params.C;
  let idx = gid.x;

  if (idx < BT) {
    let x = idx * C;
    let mean_bt = mean[idx];
    let rstd_bt = rstd[idx];
    var dnorm_mean = 0.0;
    var dnorm_norm_mean = 0.0;
    for (var i = 0u; i < C; i++) {
      let norm_bti = (inp[x + i] - mean_bt) * rstd_bt;
      let dnorm_i = weight[i] * dout[x + i];
      dnorm_mean += dnorm_i;
      dnorm_norm_mean += dnorm_i * norm_bti;
    }
    dnorm_mean = dnorm_mean / f32(C);
    dnorm_norm_mean = dnorm_norm_mean / f32(C);
    for (var i = 0u; i < C; i++) {
      let norm_bti = (inp[x + i] - mean_bt) * rstd_bt;
      let dnorm_i = weight[i] * dout[x + i];
      dinp[x + i] += (dnorm_i - dnorm_mean - norm_bti * dnorm_norm_mean) * rstd_bt;
    }
  }

  if (idx < C) {
    var dw = dweight[idx];
    var db = dbias[idx];
    for (var r = 0u; r < BT; r++) {
      let d = dout[r * C + idx];
      dw += (inp[r * C + idx] - mean[r]) * rstd[r] * d;
      db += d;
    }
    dweight[idx] = dw;
    dbias[idx] = db;
  }
}
