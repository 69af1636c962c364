// llm.c's softmax_forward(probs, logits, B, T, V, Vp): the probabilities of each (b, t) row over
// the real vocabulary V of the padded Vp columns,
//   probs[bt, v] = exp(logits[bt, v] - max) / Σ_{v' < V} exp(logits[bt, v'] - max)    (v < V)
//   probs[bt, v] = 0                                                                   (V ≤ v < Vp)
// Conventions: storage read_write, sizes in `Params` bound last; one thread per row.

struct Params {
  B: u32,
  T: u32,
  V: u32,
  Vp: u32,
}

@group(0) @binding(0) var<storage, read_write> probs: array<f32>;
@group(0) @binding(1) var<storage, read_write> logits: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;

@compute @workgroup_size(256)
fn softmax_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let V = params.V;
  let Vp = params.Vp;
  let bt = gid.x;
  if (bt >= params.B * params.T) { return; }
  let row = bt * Vp;
  var maxval = logits[row];
  for (var i = 1u; i < V; i++) {
    maxval = max(maxval, logits[row + i]);
  }
  var sum = 0.0;
  for (var i = 0u; i < V; i++) {
    let e = exp(logits[row + i] - maxval);
    probs[row + i] = e;
    sum += e;
  }
  for (var i = 0u; i < V; i++) {
    probs[row + i] /= sum;
  }
  for (var i = V; i < Vp; i++) {
    probs[row + i] = 0.0;  // the padded columns take no part
  }
}
