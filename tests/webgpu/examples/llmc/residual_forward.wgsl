// llm.c's residual_forward(out, inp1, inp2, N): out = inp1 + inp2.
// Conventions: storage read_write, sizes in `Params` bound last; one thread per element.

struct Params {
  N: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> inp1: array<f32>;
@group(0) @binding(2) var<storage, read_write> inp2: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn residual_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.N) { return; }
  out[i] = inp1[i] + inp2[i];
}
