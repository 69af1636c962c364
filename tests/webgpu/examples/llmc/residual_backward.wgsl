// llm.c's residual_backward(dinp1, dinp2, dout, N) (train_gpt2.c): the residual's gradient
// flows unchanged into both branches, dinp1 += dout, dinp2 += dout (accumulated).
// Conventions: storage read_write, sizes in `Params` bound last; one thread per element.

struct Params {
  N: u32,
}

@group(0) @binding(0) var<storage, read_write> dinp1: array<f32>;
@group(0) @binding(1) var<storage, read_write> dinp2: array<f32>;
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn residual_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.N) { return; }
  dinp1[i] += dout[i];
  dinp2[i] += dout[i];
}
