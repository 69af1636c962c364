// adamw_update_f16: the fp32 AdamW step of optimizer.wgsl's adamw_update, then the fp16 mirror
// of the new weight in the same pass. A module of its own: only it needs shader-f16. Bindings:
// those of adamw_update with an _mp suffix on each name, then dst_w16 (storage rw, f16).
enable f16;

// ---- adamw_update_f16 (9 bindings): the step, then the fp16 mirror of the new weight ------

@group(0) @binding(0) var<storage, read_write> w_mp: array<f32>;
@group(0) @binding(1) var<storage, read_write> g_mp: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_buf_mp: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_buf_mp: array<f32>;
@group(0) @binding(4) var<storage, read> grad_stats_mp: array<f32>;
@group(0) @binding(5) var<uniform> size_mp: u32;
@group(0) @binding(6) var<uniform> hp_mp: vec4<f32>;
@group(0) @binding(7) var<uniform> bias_mp: vec4<f32>;
@group(0) @binding(8) var<storage, read_write> dst_w16: array<f16>;

@compute @workgroup_size(256)
fn adamw_update_f16(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= size_mp) { return; }
  let s = adamw_element(w_mp[i], g_mp[i], m_buf_mp[i], v_buf_mp[i], grad_stats_mp[1], hp_mp, bias_mp);
  w_mp[i] = s.w;
  m_buf_mp[i] = s.m;
  v_buf_mp[i] = s.v;
  g_mp[i] = 0.0;
  dst_w16[i] = f16(clamp(s.w, -65504.0, 65504.0));
}
