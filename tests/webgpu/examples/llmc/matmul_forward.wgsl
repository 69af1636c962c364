// llm.c's matmul_forward(out, inp, weight, bias, B, T, C, OC): a linear layer with the weight in
// PyTorch's [OC, C] layout,
//   out[bt, o] = bias[o] + Σ_i inp[bt, i]·weight[o, i]      inp [B·T, C], out [B·T, OC]
// summed from the bias, as llm.c's CPU matmul_forward does. Conventions: storage read_write,
// sizes in `Params` bound last; one thread per output on a 16×16 grid (x: o, y: bt), the naive
// first kernel of llm.c's dev/cuda before tiling.

struct Params {
  B: u32,
  T: u32,
  C: u32,
  OC: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> inp: array<f32>;
@group(0) @binding(2) var<storage, read_write> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> bias: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(16, 16)
fn matmul_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = params.C;
  let OC = params.OC;
  let o = gid.x;
  let bt = gid.y;
  if (o >= OC || bt >= params.B * params.T) { return; }
  var val = bias[o];
  for (var i = 0u; i < C; i++) {
    val += inp[bt * C + i] * weight[o * C + i];
  }
  out[bt * OC + o] = val;
}
