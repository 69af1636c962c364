// llm.c's crossentropy_forward(losses, probs, targets, B, T, Vp): the loss of each (b, t)
// position, losses[bt] = -log(probs[bt, targets[bt]]).
// Conventions: storage read_write, sizes in `Params` bound last; one thread per position.

struct Params {
  B: u32,
  T: u32,
  V: u32,
  Vp: u32,
}

@group(0) @binding(0) var<storage, read_write> losses: array<f32>;
@group(0) @binding(1) var<storage, read_write> probs: array<f32>;
@group(0) @binding(2) var<storage, read_write> targets: array<i32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn crossentropy_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let bt = gid.x;
  if (bt >= params.B * params.T) { return; }
  let ix = u32(targets[bt]);
  losses[bt] = -log(probs[bt * params.Vp + ix]);
}
