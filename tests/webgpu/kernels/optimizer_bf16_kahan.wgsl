// adamw_update_bf16_kahan (--precision bf16-kahan): the weights are bf16 values, and each one
// carries a bf16 compensation, what earlier roundings lost. The step delta of optimizer.wgsl's
// adamw_update is added to the compensation, the sum to the weight, and the weight rounded to the
// nearest bf16; what that rounding lost is the next compensation:
//   s = comp - delta;  wb16 = bf16(w + s);  comp = bf16(s - (f32(wb16) - w));  w = f32(wb16)
// each operation a separate f32 rounding in this order (reordered, s - (w_new - w) is 0 and the
// compensation lost). Bindings: those of adamw_update with a _kh suffix, dst_wb16_kh, then
// comp_kh, both two bf16 a u32 word (element 2j in word j's low half). As in optimizer_bf16.wgsl,
// each thread owns one word of each (elements 2j and 2j + 1) and keeps a high half past the
// range as it found it.

@group(0) @binding(0) var<storage, read_write> w_kh: array<f32>;
@group(0) @binding(1) var<storage, read_write> g_kh: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_buf_kh: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_buf_kh: array<f32>;
@group(0) @binding(4) var<storage, read> grad_stats_kh: array<f32>;
@group(0) @binding(5) var<uniform> size_kh: u32;
@group(0) @binding(6) var<uniform> hp_kh: vec4<f32>;
@group(0) @binding(7) var<uniform> bias_kh: vec4<f32>;
@group(0) @binding(8) var<storage, read_write> dst_wb16_kh: array<u32>;
@group(0) @binding(9) var<storage, read_write> comp_kh: array<u32>;

// Element i's step with the compensation bits c (low 16 bits); returns the new weight's bf16
// bits and the new compensation's.
fn step_kh(i: u32, c: u32) -> vec2<u32> {
  let w_old = w_kh[i];
  let st = adamw_element(w_old, g_kh[i], m_buf_kh[i], v_buf_kh[i], grad_stats_kh[1], hp_kh, bias_kh);
  let s = bitcast<f32>(c << 16u) - st.delta;
  let bits = bf16_round_bits(bitcast<u32>(w_old + s));
  let w_new = bitcast<f32>(bits << 16u);
  let lost = bf16_round_bits(bitcast<u32>(s - (w_new - w_old)));
  w_kh[i] = w_new;
  m_buf_kh[i] = st.m;
  v_buf_kh[i] = st.v;
  g_kh[i] = 0.0;
  return vec2<u32>(bits, lost);
}

@compute @workgroup_size(256)
fn adamw_update_bf16_kahan(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = flat_id(gid, nwg);
  if (2u * j >= size_kh) { return; }
  let comp = comp_kh[j];
  let lo = step_kh(2u * j, comp & 0xFFFFu);
  var hi = vec2<u32>(dst_wb16_kh[j] >> 16u, comp >> 16u);
  if (2u * j + 1u < size_kh) { hi = step_kh(2u * j + 1u, comp >> 16u); }
  dst_wb16_kh[j] = lo.x | (hi.x << 16u);
  comp_kh[j] = lo.y | (hi.y << 16u);
}
