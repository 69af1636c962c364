// llm.c's encoder_backward(dwte, dwpe, dout, inp, B, T, C): the embeddings' gradients,
//   dwte[inp[b,t],:] += dout[b,t,:]      dwpe[t,:] += dout[b,t,:]
// Conventions: storage read_write, sizes in `Params` bound last.
// llm.c's CUDA kernel adds with atomicAdd; WGSL has no float atomics, so thread c owns channel c
// of both tables and walks the positions (b, t) in order: no two threads write one element, and
// a token seen twice adds twice in position order (deterministic).

struct Params {
  B: u32,
  T: u32,
  C: u32,
}

@group(0) @binding(0) var<storage, read_write> dwte: array<f32>;
@group(0) @binding(1) var<storage, read_write> dwpe: array<f32>;
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;
@group(0) @binding(3) var<storage, read_write> inp: array<i32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(256)
fn encoder_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let c = gid.x;
  if (c >= C) { return; }
  for (var b = 0u; b < B; b++) {
    for (var t = 0u; t < T; t++) {
      let bt = b * T + t;
      let d = dout[bt * C + c];
      let ix = u32(inp[bt]);
      dwte[ix * C + c] += d;
      dwpe[t * C + c] += d;
    }
  }
}
