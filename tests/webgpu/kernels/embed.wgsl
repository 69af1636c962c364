// Embedding lookups, forward and backward: gpt2's token + position (embed_*) and llama's
// token-only (token_embed_*). Bindings in the fixture's order, sizes as u32 uniforms. The
// backward kernels give each thread one element of the table gradient and sum over the
// positions that read it, so rows shared by several positions need no atomics.

@group(0) @binding(0) var<storage, read_write> ef_out: array<f32>;
@group(0) @binding(1) var<storage, read> ef_tokens: array<i32>;
@group(0) @binding(2) var<storage, read> ef_wte: array<f32>;
@group(0) @binding(3) var<storage, read> ef_wpe: array<f32>;
@group(0) @binding(4) var<uniform> ef_B: u32;
@group(0) @binding(5) var<uniform> ef_T: u32;
@group(0) @binding(6) var<uniform> ef_C: u32;

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]; one thread per output element.
@compute @workgroup_size(256)
fn embed_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = ef_C;
  let idx = gid.x;
  if (idx >= ef_B * ef_T * C) { return; }
  let bt = idx / C;
  let c = idx % C;
  let t = bt % ef_T;
  ef_out[idx] = ef_wte[u32(ef_tokens[bt]) * C + c] + ef_wpe[t * C + c];
}

@group(0) @binding(0) var<storage, read_write> eb_dwte: array<f32>;
@group(0) @binding(1) var<storage, read_write> eb_dwpe: array<f32>;
@group(0) @binding(2) var<storage, read> eb_dout: array<f32>;
@group(0) @binding(3) var<storage, read> eb_tokens: array<i32>;
@group(0) @binding(4) var<uniform> eb_B: u32;
@group(0) @binding(5) var<uniform> eb_T: u32;
@group(0) @binding(6) var<uniform> eb_C: u32;

// Thread (v, c) over the wte gradient: Σ over positions with token v; threads (t, c) with
// t < T also sum the position gradient over the batch.
@compute @workgroup_size(256)
fn embed_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = eb_C;
  let B = eb_B;
  let T = eb_T;
  let idx = gid.x;
  if (idx >= arrayLength(&eb_dwte)) { return; }
  let v = i32(idx / C);
  let c = idx % C;
  var s: f32 = 0.0;
  for (var bt = 0u; bt < B * T; bt++) {
    if (eb_tokens[bt] == v) { s += eb_dout[bt * C + c]; }
  }
  eb_dwte[idx] += s;
  if (idx < T * C) {
    var p: f32 = 0.0;
    for (var b = 0u; b < B; b++) { p += eb_dout[b * T * C + idx]; }
    eb_dwpe[idx] += p;
  }
}

@group(0) @binding(0) var<storage, read_write> tf_out: array<f32>;
@group(0) @binding(1) var<storage, read> tf_tokens: array<i32>;
@group(0) @binding(2) var<storage, read> tf_wte: array<f32>;
@group(0) @binding(3) var<uniform> tf_N: u32;
@group(0) @binding(4) var<uniform> tf_C: u32;

@compute @workgroup_size(256)
fn token_embed_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = tf_C;
  let idx = gid.x;
  if (idx >= tf_N * C) { return; }
  tf_out[idx] = tf_wte[u32(tf_tokens[idx / C]) * C + idx % C];
}

@group(0) @binding(0) var<storage, read_write> tb_dwte: array<f32>;
@group(0) @binding(1) var<storage, read> tb_dout: array<f32>;
@group(0) @binding(2) var<storage, read> tb_tokens: array<i32>;
@group(0) @binding(3) var<uniform> tb_N: u32;
@group(0) @binding(4) var<uniform> tb_C: u32;

@compute @workgroup_size(256)
fn token_embed_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let C = tb_C;
  let idx = gid.x;
  if (idx >= arrayLength(&tb_dwte)) { return; }
  let v = i32(idx / C);
  let c = idx % C;
  var s: f32 = 0.0;
  for (var i = 0u; i < tb_N; i++) {
    if (tb_tokens[i] == v) { s += tb_dout[i * C + c]; }
  }
  tb_dwte[idx] += s;
}
