// The optimizer kernels over the multi-tensor mega-buffer: the global gradient norm
// (reduce_norm_sq, finalize_grad_stats) and the fused AdamW step in four variants: fp32 state
// (adamw_update), the same plus the fp16 weight mirror written in the same pass
// (adamw_update_f16, in optimizer_f16.wgsl: only it needs shader-f16), or plus the bf16 mirror
// (adamw_update_bf16, in optimizer_bf16.wgsl, after prelude/bf16.wgsl), and 8-bit state
// (adamw_8bit_update). The AdamW element they share is prelude/optimizer.wgsl's. Their bind
// groups are fixed (binding 0 first):
//   adamw_update      w, g, m_buf, v_buf (storage rw), grad_stats (storage r), size (uniform u32),
//                     hp = (lr, β1, β2, wd), bias = (β1ᵗ, β2ᵗ, ε, unused) (uniform vec4<f32>)
//   adamw_update_f16  the same with an _mp suffix on each name, then dst_w16 (storage rw, f16)
//   adamw_update_bf16 the same with a _bf suffix on each name, then dst_wb16 (storage rw, u32
//                     words of two bf16)
//   adamw_8bit_update w, g, m_packed, v_packed (u32 words of four 8-bit codes), m_scale, v_scale
//                     (storage rw, one f32 per 256-element block), grad_stats, size, hp, bias
// β1ᵗ and β2ᵗ come from the host (pow in double, rounded to f32), so the kernels never see t.

// ---- reduce_norm_sq, in two passes: partial sums, then their sum ------------------------
// A fixed order, so the same gradients give the same bits on every run and device: each of G
// workgroups sums its grid-stride share into partial[g] (a tree in the workgroup), then one
// workgroup sums the G partials (each thread a fixed stride of them, then a tree) and stores
// the result. (Atomic float adds from many workgroups land in whatever order they finish: on
// an NVIDIA GPU the last bits of the norm then change from run to run.)
// Pass 1: data (r), partial (rw, G floats), n. Pass 2: partial (r), result (rw), groups {G}.

@group(0) @binding(0) var<storage, read> rn_data: array<f32>;
@group(0) @binding(1) var<storage, read_write> rn_partial: array<f32>;
@group(0) @binding(2) var<uniform> rn_n: u32;

@group(0) @binding(0) var<storage, read> rf_partial: array<f32>;
@group(0) @binding(1) var<storage, read_write> rf_result: array<f32>;
struct Groups { G: u32 }
@group(0) @binding(2) var<uniform> rf_groups: Groups;

var<workgroup> sh_red: array<f32, 256>;

// The workgroup's tree over sh_red, thread `tid` holding `local`: the sum, in thread 0.
fn tree_sum(tid: u32, local: f32) -> f32 {
  sh_red[tid] = local;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (tid < s) { sh_red[tid] = sh_red[tid] + sh_red[tid + s]; }
    workgroupBarrier();
  }
  return sh_red[0];
}

// Grid-stride sum of squares of the finite elements, one partial per workgroup.
@compute @workgroup_size(256)
fn reduce_norm_sq(@builtin(global_invocation_id) gid: vec3<u32>,
                  @builtin(local_invocation_index) tid: u32,
                  @builtin(workgroup_id) wid: vec3<u32>,
                  @builtin(num_workgroups) nwg: vec3<u32>) {
  let grid = nwg.x * WG;
  var local: f32 = 0.0;
  for (var i = gid.x; i < rn_n; i = i + grid) {
    let v = rn_data[i];
    if (is_finite(v)) { local = local + v * v; }
  }
  let sum = tree_sum(tid, local);
  if (tid == 0u) { rn_partial[wid.x] = sum; }
}

@compute @workgroup_size(256)
fn reduce_norm_sq_final(@builtin(local_invocation_index) tid: u32) {
  var local: f32 = 0.0;
  for (var g = tid; g < rf_groups.G; g = g + WG) { local = local + rf_partial[g]; }
  let sum = tree_sum(tid, local);
  if (tid == 0u) { rf_result[0] = sum; }
}

// ---- finalize_grad_stats: norm_sq (r), grad_stats (rw: [grad_norm, clip]), max_norm ------

@group(0) @binding(0) var<storage, read> fg_norm_sq: array<f32>;
@group(0) @binding(1) var<storage, read_write> fg_grad_stats: array<f32>;
@group(0) @binding(2) var<uniform> fg_max_norm: f32;

@compute @workgroup_size(1)
fn finalize_grad_stats() {
  let norm = sqrt(fg_norm_sq[0]);
  fg_grad_stats[0] = norm;
  fg_grad_stats[1] = min(1.0, fg_max_norm / max(norm, 1e-6));
}

// ---- adamw_update (8 bindings) ------------------------------------------------------------

@group(0) @binding(0) var<storage, read_write> w: array<f32>;
@group(0) @binding(1) var<storage, read_write> g: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_buf: array<f32>;
@group(0) @binding(3) var<storage, read_write> v_buf: array<f32>;
@group(0) @binding(4) var<storage, read> grad_stats: array<f32>;
@group(0) @binding(5) var<uniform> size: u32;
@group(0) @binding(6) var<uniform> hp: vec4<f32>;
@group(0) @binding(7) var<uniform> bias: vec4<f32>;

@compute @workgroup_size(256)
fn adamw_update(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= size) { return; }
  let s = adamw_element(w[i], g[i], m_buf[i], v_buf[i], grad_stats[1], hp, bias);
  w[i] = s.w;
  m_buf[i] = s.m;
  v_buf[i] = s.v;
  g[i] = 0.0;
}

// ---- adamw_8bit_update (10 bindings) ------------------------------------------------------
// One workgroup per block of 256 elements: dequantize (m = code·scale with int8 codes;
// v = (code·scale)² with uint8 codes of √v), the fp32 step, then requantize with the block's
// fresh maxima: m absmax/127 rounded to nearest even; v as √v in 255 steps, never rounded to 0.

@group(0) @binding(0) var<storage, read_write> q_w: array<f32>;
@group(0) @binding(1) var<storage, read_write> q_g: array<f32>;
@group(0) @binding(2) var<storage, read_write> m_packed: array<u32>;
@group(0) @binding(3) var<storage, read_write> v_packed: array<u32>;
@group(0) @binding(4) var<storage, read_write> m_scale: array<f32>;
@group(0) @binding(5) var<storage, read_write> v_scale: array<f32>;
@group(0) @binding(6) var<storage, read> q_grad_stats: array<f32>;
@group(0) @binding(7) var<uniform> q_size: u32;
@group(0) @binding(8) var<uniform> q_hp: vec4<f32>;
@group(0) @binding(9) var<uniform> q_bias: vec4<f32>;

var<workgroup> sh_m: array<f32, 256>;
var<workgroup> sh_v: array<f32, 256>;
var<workgroup> sh_mcode: array<u32, 256>;
var<workgroup> sh_vcode: array<u32, 256>;

const F32_MAX: f32 = 0x1.fffffep+127f;

@compute @workgroup_size(256)
fn adamw_8bit_update(@builtin(workgroup_id) wid: vec3<u32>,
                     @builtin(local_invocation_index) tid: u32,
                     @builtin(num_workgroups) nwg: vec3<u32>) {
  let block = wid.x + wid.y * nwg.x;
  let i = block * WG + tid;
  let valid = i < q_size;
  var m_new: f32 = 0.0;
  var v_new: f32 = 0.0;
  if (valid) {
    let shift = 8u * (i % 4u);
    let mc = extractBits(bitcast<i32>(m_packed[i / 4u]), shift, 8u);  // sign-extended int8
    let vc = extractBits(v_packed[i / 4u], shift, 8u);
    let r = f32(vc) * v_scale[block];
    let s = adamw_element(q_w[i], q_g[i], f32(mc) * m_scale[block], r * r, q_grad_stats[1], q_hp, q_bias);
    q_w[i] = s.w;
    q_g[i] = 0.0;
    m_new = s.m;
    v_new = s.v;
  }
  sh_m[tid] = abs(m_new);
  sh_v[tid] = v_new;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k = k >> 1u) {
    if (tid < k) {
      sh_m[tid] = max(sh_m[tid], sh_m[tid + k]);
      sh_v[tid] = max(sh_v[tid], sh_v[tid + k]);
    }
    workgroupBarrier();
  }
  var ms = sh_m[0] / 127.0;
  if (!is_finite(ms)) { ms = F32_MAX / 127.0; }
  let vmax = sh_v[0];
  let v_inf = !is_finite(vmax);
  let vs = select(sqrt(vmax) / 255.0, vmax, v_inf || vmax == 0.0);
  var mcode: i32 = 0;
  if (ms != 0.0) { mcode = i32(clamp(round(m_new / ms), -127.0, 127.0)); }
  var vcode: u32 = 0u;
  if (v_inf) {
    vcode = 255u;
  } else if (v_new > 0.0) {
    vcode = u32(clamp(round(sqrt(v_new) / vs), 1.0, 255.0));
  }
  workgroupBarrier();  // every thread has read sh_m[0] and sh_v[0]
  sh_mcode[tid] = select(0u, bitcast<u32>(mcode) & 0xffu, valid);
  sh_vcode[tid] = select(0u, vcode, valid);
  workgroupBarrier();
  let word = block * (WG / 4u) + tid;
  if (tid < WG / 4u && 4u * word < q_size) {
    let b = 4u * tid;
    m_packed[word] = sh_mcode[b] | (sh_mcode[b + 1u] << 8u) | (sh_mcode[b + 2u] << 16u) | (sh_mcode[b + 3u] << 24u);
    v_packed[word] = sh_vcode[b] | (sh_vcode[b + 1u] << 8u) | (sh_vcode[b + 2u] << 16u) | (sh_vcode[b + 3u] << 24u);
  }
  if (tid == 0u) {
    m_scale[block] = ms;
    v_scale[block] = vs;
  }
}
