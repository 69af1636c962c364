// llm.c's layernorm_forward(out, mean, rstd, inp, weight, bias, B, T, C), eps 1e-5, biased
// variance, over the last axis of [B, T, C]:
//   mean = Σx/C   rstd = 1/√(Σ(x - mean)²/C + eps)   out = (x - mean)·rstd·weight + bias
// mean and rstd [B, T] are kept for the backward. Conventions: storage read_write, sizes in
// `Params` bound last; one thread per (b, t) row, as llm.c's first CUDA kernel.

const EPS: f32 = 1e-5;

struct Params {
  B: u32,
  T: u32,
  C: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> mean: array<f32>;
@group(0) @binding(2) var<storage, read_write> rstd: array<f32>;
@group(0) @binding(3) var<storage, read_write> inp: array<f32>;
@group(0) @binding(4) var<storage, read_write> weight: array<f32>;
@group(0) @binding(5) var<storage, read_write> bias: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

@compute @workgroup_size(256)
fn layernorm_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = params.C;
  let bt = gid.x;
  if (bt >= params.B * params.T) { return; }
  let x = bt * C;
  var m = 0.0;
  for (var i = 0u; i < C; i++) { m += inp[x + i]; }
  m = m / f32(C);
  var v = 0.0;
  for (var i = 0u; i < C; i++) {
    let xshift = inp[x + i] - m;
    v += xshift * xshift;
  }
  v = v / f32(C);
  let s = 1.0 / sqrt(v + EPS);
  for (var i = 0u; i < C; i++) {
    let n = s * (inp[x + i] - m);
    out[x + i] = n * weight[i] + bias[i];
  }
  mean[bt] = m;
  rstd[bt] = s;
}
