// llm.c's crossentropy_softmax_backward(dlogits, dlosses, probs, targets, B, T, V, Vp): the
// gradient of the loss through the softmax into the logits,
//   dlogits[bt, v] = (probs[bt, v] - [v = targets[bt]])·dlosses[bt]     (v < V)
//   dlogits[bt, v] = 0                                                 (V ≤ v < Vp)
// dlosses [B·T] is each position's weight in the total loss (1/(B·T) for the mean).
// This kernel assigns dlogits, as llm.c's train_gpt2.cu does (its fused classifier writes the
// gradient over the logits); llm.c's CPU and dev/cuda versions accumulate (+=) into a dlogits
// that the training step zeroed first, which is the same only when someone zeroes it.
// Conventions: storage read_write, sizes in `Params` bound last; one thread per element.

struct Params {
  B: u32,
  T: u32,
  V: u32,
  Vp: u32,
}

@group(0) @binding(0) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(1) var<storage, read_write> dlosses: array<f32>;
@group(0) @binding(2) var<storage, read_write> probs: array<f32>;
@group(0) @binding(3) var<storage, read_write> targets: array<i32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(256)
fn crossentropy_softmax_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let V = params.V;
  let Vp = params.Vp;
  let idx = gid.x;
  if (idx >= params.B * params.T * Vp) { return; }
  let bt = idx / Vp;
  let v = idx % Vp;
  if (v >= V) {
    dlogits[idx] = 0.0;
    return;
  }
  let indicator = select(0.0, 1.0, v == u32(targets[bt]));
  dlogits[idx] = (probs[idx] - indicator) * dlosses[bt];
}
