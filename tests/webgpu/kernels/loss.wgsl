// crossentropy_forward_backward: per row, lse over the first V of Vp logits, the loss with the
// z-loss term, and dlogits = ((p − onehot) + 2·z·lse·p)·dloss for j < V, 0 for the padding.
// Bindings: losses, dlogits (rw), logits, targets (r), N, V, Vp (u32), dloss, z (f32 uniforms).
// One thread per row.
@group(0) @binding(0) var<storage, read_write> losses: array<f32>;
@group(0) @binding(1) var<storage, read_write> dlogits: array<f32>;
@group(0) @binding(2) var<storage, read> logits: array<f32>;
@group(0) @binding(3) var<storage, read> targets: array<i32>;
@group(0) @binding(4) var<uniform> N: u32;
@group(0) @binding(5) var<uniform> V: u32;
@group(0) @binding(6) var<uniform> Vp: u32;
@group(0) @binding(7) var<uniform> dloss: f32;
@group(0) @binding(8) var<uniform> z: f32;

@compute @workgroup_size(64)
fn crossentropy_forward_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= N) { return; }
  let base = i * Vp;
  var m = logits[base];
  for (var j = 1u; j < V; j++) { m = max(m, logits[base + j]); }
  var sum: f32 = 0.0;
  for (var j = 0u; j < V; j++) { sum += exp(logits[base + j] - m); }
  let lse = m + log(sum);
  let t = u32(targets[i]);
  losses[i] = lse - logits[base + t] + z * lse * lse;
  for (var j = 0u; j < V; j++) {
    let p = exp(logits[base + j] - lse);
    let onehot = select(0.0, 1.0, j == t);
    dlogits[base + j] = (p - onehot) * dloss + 2.0 * z * lse * p * dloss;
  }
  for (var j = V; j < Vp; j++) { dlogits[base + j] = 0.0; }
}
