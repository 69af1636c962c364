// adamw_update_bf16: the fp32 AdamW step of optimizer.wgsl's adamw_update, then the bf16 mirror
// of the new weight in the same pass, rounded by prelude/bf16.wgsl's bf16_round_bits (integer
// work on the f32 bits: no shader-f16). Bindings: those of adamw_update with a _bf suffix on each
// name, then dst_wb16 (storage rw, two bf16 a u32 word, element 2j in word j's low half).
//
// WGSL stores no 16-bit value to a u32 array, and two threads storing the two halves of one word
// would race, so each thread owns one word: it steps elements 2j and 2j + 1 and writes word j
// whole (the dispatch is ceil(size / 2) threads, as cast_f32_to_bf16's). Where size is odd, the
// last word's high half lies past the range (the next range's first element, or padding): the
// thread keeps it as it found it, so that a range never writes another's mirror.

@group(0) @binding(0) var<storage, read_write> w_bf: array<f32>;
@group(0) @binding(1) var<storage, read_write> g_bf: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_buf_bf: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_buf_bf: array<f32>;
@group(0) @binding(4) var<storage, read> grad_stats_bf: array<f32>;
@group(0) @binding(5) var<uniform> size_bf: u32;
@group(0) @binding(6) var<uniform> hp_bf: vec4<f32>;
@group(0) @binding(7) var<uniform> bias_bf: vec4<f32>;
@group(0) @binding(8) var<storage, read_write> dst_wb16: array<u32>;

// Element i's step, stored as adamw_update stores it; returns the bf16 bits of its new weight.
fn step_bf16(i: u32) -> u32 {
  let s = adamw_element(w_bf[i], g_bf[i], m_buf_bf[i], v_buf_bf[i], grad_stats_bf[1], hp_bf, bias_bf);
  w_bf[i] = s.w;
  m_buf_bf[i] = s.m;
  v_buf_bf[i] = s.v;
  g_bf[i] = 0.0;
  return bf16_round_bits(bitcast<u32>(s.w));
}

@compute @workgroup_size(256)
fn adamw_update_bf16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = flat_id(gid, nwg);
  if (2u * j >= size_bf) { return; }
  let lo = step_bf16(2u * j);
  var hi = dst_wb16[j] >> 16u;
  if (2u * j + 1u < size_bf) { hi = step_bf16(2u * j + 1u); }
  dst_wb16[j] = lo | (hi << 16u);
}
