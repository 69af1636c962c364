// llm.c's encoder_forward(out, inp, wte, wpe, B, T, C): token embedding plus position embedding,
//   out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]
// Conventions (llm.c as ported to WGSL, gpu.cpp style): every storage buffer read_write, the
// sizes in one uniform `Params`, bound last; one thread per output element.

struct Params {
  B: u32,
  T: u32,
  C: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> inp: array<i32>;
@group(0) @binding(2) var<storage, read_write> wte: array<f32>;
@group(0) @binding(3) var<storage, read_write> wpe: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

@compute @workgroup_size(256)
fn encoder_forward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let idx = gid.x;
  if (idx >= B * T * C) { return; }
  let bt = idx / C;
  let t = bt % T;
  let c = idx % C;
  let ix = u32(inp[bt]);
  out[idx] = wte[ix * C + c] + wpe[t * C + c];
}
