// adamw_update_bf16_sr (--precision bf16-pure): the fp32 AdamW step of optimizer.wgsl's
// adamw_update, then the new weight rounded to bf16 stochastically, into the mirror and, widened,
// back into w, so that the weights stay bf16 values. The noise of element i is a hash of the
// seed, the step t and the element's index in the whole mega-buffer (first + i), never of a
// thread, so a GPU gets reftrain's bits:
//   mix(x) = x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16
//   noise  = mix((first + i) ^ mix(t ^ mix(seed))) >> 16      (u32 arithmetic, wrapping)
//   wb16   = (bits(w) + noise) >> 16, a subnormal result ±0, a NaN 0x7FC0
// Bindings: those of adamw_update with a _sr suffix, the step t (bound here: the hash needs it),
// dst_wb16_sr (two bf16 a u32 word, element 2j in word j's low half), then seed and first. As in
// optimizer_bf16.wgsl, each thread owns one word of the mirror (elements 2j and 2j + 1) and keeps
// a high half past the range as it found it.

@group(0) @binding(0) var<storage, read_write> w_sr: array<f32>;
@group(0) @binding(1) var<storage, read_write> g_sr: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_buf_sr: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_buf_sr: array<f32>;
@group(0) @binding(4) var<storage, read> grad_stats_sr: array<f32>;
@group(0) @binding(5) var<uniform> size_sr: u32;
@group(0) @binding(6) var<uniform> hp_sr: vec4<f32>;
@group(0) @binding(7) var<uniform> bias_sr: vec4<f32>;
@group(0) @binding(8) var<storage, read> t_sr: array<i32>;
@group(0) @binding(9) var<storage, read_write> dst_wb16_sr: array<u32>;
@group(0) @binding(10) var<uniform> seed_sr: u32;
@group(0) @binding(11) var<uniform> first_sr: u32;

fn mix32(x0: u32) -> u32 {
  var x = x0;
  x ^= x >> 16u;
  x *= 0x7FEB352Du;
  x ^= x >> 15u;
  x *= 0x846CA68Bu;
  x ^= x >> 16u;
  return x;
}

// The bf16 bits of the f32 bits u rounded up in magnitude when the noise carries out of the low
// 16 bits. A non-NaN magnitude is at most 0x7F800000, so the carry never reaches the sign.
fn bf16_stochastic_bits(u: u32, noise: u32) -> u32 {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) { return 0x7FC0u; }
  let r = (u + noise) >> 16u;
  return select(r, r & 0x8000u, (r & 0x7F80u) == 0u);
}

// Element i's step, its new weight rounded; returns the bf16 bits.
fn step_sr(i: u32, key: u32) -> u32 {
  let s = adamw_element(w_sr[i], g_sr[i], m_buf_sr[i], v_buf_sr[i], grad_stats_sr[1], hp_sr, bias_sr);
  let bits = bf16_stochastic_bits(bitcast<u32>(s.w), mix32((first_sr + i) ^ key) >> 16u);
  w_sr[i] = bitcast<f32>(bits << 16u);
  m_buf_sr[i] = s.m;
  v_buf_sr[i] = s.v;
  g_sr[i] = 0.0;
  return bits;
}

@compute @workgroup_size(256)
fn adamw_update_bf16_sr(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = flat_id(gid, nwg);
  if (2u * j >= size_sr) { return; }
  let key = mix32(u32(t_sr[0]) ^ mix32(seed_sr));
  let lo = step_sr(2u * j, key);
  var hi = dst_wb16_sr[j] >> 16u;
  if (2u * j + 1u < size_sr) { hi = step_sr(2u * j + 1u, key); }
  dst_wb16_sr[j] = lo | (hi << 16u);
}
