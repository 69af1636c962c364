// RoPE, rotate-half convention: element i of a head pairs with i + hs/2, angle t·θ^(−2i/hs).
// Bindings: out/dx (rw), x/dout (r), B, T, NH, hs (u32), theta (f32). One thread per pair.
// The angle is computed in f32 here (reftrain: in double, rounded once): it differs by about
// t·2⁻²⁴ rad, far inside the tolerance at these positions.
@group(0) @binding(0) var<storage, read_write> rf_out: array<f32>;
@group(0) @binding(1) var<storage, read> rf_x: array<f32>;
@group(0) @binding(2) var<uniform> rf_B: u32;
@group(0) @binding(3) var<uniform> rf_T: u32;
@group(0) @binding(4) var<uniform> rf_NH: u32;
@group(0) @binding(5) var<uniform> rf_hs: u32;
@group(0) @binding(6) var<uniform> rf_theta: f32;

@group(0) @binding(0) var<storage, read_write> rb_dx: array<f32>;
@group(0) @binding(1) var<storage, read> rb_dout: array<f32>;
@group(0) @binding(2) var<uniform> rb_B: u32;
@group(0) @binding(3) var<uniform> rb_T: u32;
@group(0) @binding(4) var<uniform> rb_NH: u32;
@group(0) @binding(5) var<uniform> rb_hs: u32;
@group(0) @binding(6) var<uniform> rb_theta: f32;

struct Pair { k: u32, half: u32, c: f32, s: f32, ok: bool }

// Pair number p over (b, t, h, i < hs/2): the index of its first element and the rotation.
fn pair_of(p: u32, B: u32, T: u32, NH: u32, hs: u32, theta: f32) -> Pair {
  let half = hs / 2u;
  let i = p % half;
  let bth = p / half;
  let h = bth % NH;
  let bt = bth / NH;
  let t = bt % T;
  let a = f32(t) * pow(theta, -2.0 * f32(i) / f32(hs));
  return Pair(bt * NH * hs + h * hs + i, half, cos(a), sin(a), bt < B * T);
}

@compute @workgroup_size(256)
fn rope_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let q = pair_of(gid.x, rf_B, rf_T, rf_NH, rf_hs, rf_theta);
  if (!q.ok) { return; }
  let x1 = rf_x[q.k];
  let x2 = rf_x[q.k + q.half];
  rf_out[q.k] = x1 * q.c - x2 * q.s;
  rf_out[q.k + q.half] = x2 * q.c + x1 * q.s;
}

@compute @workgroup_size(256)
fn rope_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let q = pair_of(gid.x, rb_B, rb_T, rb_NH, rb_hs, rb_theta);
  if (!q.ok) { return; }
  let g1 = rb_dout[q.k];
  let g2 = rb_dout[q.k + q.half];
  rb_dx[q.k] += g1 * q.c + g2 * q.s;
  rb_dx[q.k + q.half] += g2 * q.c - g1 * q.s;
}
