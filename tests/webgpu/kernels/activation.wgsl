// The activations: GELU (tanh and exact erf forms) and SwiGLU, forward and backward.
// Bindings in the fixture's order (outputs first, then inputs, then the count n as a uniform);
// backward kernels accumulate (+=) into their gradients. One thread per element; flat_id is the
// prelude's (prelude/elementwise.wgsl).

// Each entry point declares its own names; the numbers repeat across entry points.
@group(0) @binding(0) var<storage, read_write> gelu_out: array<f32>;
@group(0) @binding(1) var<storage, read> gelu_x: array<f32>;
@group(0) @binding(2) var<uniform> gelu_n: u32;

@group(0) @binding(0) var<storage, read_write> gelub_dx: array<f32>;
@group(0) @binding(1) var<storage, read> gelub_x: array<f32>;
@group(0) @binding(2) var<storage, read> gelub_dout: array<f32>;
@group(0) @binding(3) var<uniform> gelub_n: u32;

@group(0) @binding(0) var<storage, read_write> gerf_out: array<f32>;
@group(0) @binding(1) var<storage, read> gerf_x: array<f32>;
@group(0) @binding(2) var<uniform> gerf_n: u32;

@group(0) @binding(0) var<storage, read_write> gerfb_dx: array<f32>;
@group(0) @binding(1) var<storage, read> gerfb_x: array<f32>;
@group(0) @binding(2) var<storage, read> gerfb_dout: array<f32>;
@group(0) @binding(3) var<uniform> gerfb_n: u32;

@group(0) @binding(0) var<storage, read_write> swi_out: array<f32>;
@group(0) @binding(1) var<storage, read> swi_gate: array<f32>;
@group(0) @binding(2) var<storage, read> swi_up: array<f32>;
@group(0) @binding(3) var<uniform> swi_n: u32;

@group(0) @binding(0) var<storage, read_write> swib_dgate: array<f32>;
@group(0) @binding(1) var<storage, read_write> swib_dup: array<f32>;
@group(0) @binding(2) var<storage, read> swib_dout: array<f32>;
@group(0) @binding(3) var<storage, read> swib_gate: array<f32>;
@group(0) @binding(4) var<storage, read> swib_up: array<f32>;
@group(0) @binding(5) var<uniform> swib_n: u32;

const SQRT_2_OVER_PI: f32 = 0.7978845608028654;
const GELU_CUBIC: f32 = 0.044715;

// tanh from e^(−2|u|) ≤ 1, so that large |u| (here up to ~70) saturates to ±1 instead of
// overflowing to Inf/Inf = NaN, which a (e^2u − 1)/(e^2u + 1) lowering would give.
fn stable_tanh(u: f32) -> f32 {
  let e = exp(-2.0 * abs(u));
  return sign(u) * (1.0 - e) / (1.0 + e);
}

// σ(g) with the exponential of −|g| only: never Inf.
fn sigmoid(g: f32) -> f32 {
  let e = exp(-abs(g));
  return select(e / (1.0 + e), 1.0 / (1.0 + e), g >= 0.0);
}

@compute @workgroup_size(256)
fn gelu_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= gelu_n) { return; }
  let x = gelu_x[i];
  let u = SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x);
  gelu_out[i] = 0.5 * x * (1.0 + stable_tanh(u));
}

@compute @workgroup_size(256)
fn gelu_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= gelub_n) { return; }
  let x = gelub_x[i];
  let th = stable_tanh(SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x));
  let du = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_CUBIC * x * x);
  let grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
  gelub_dx[i] = gelub_dx[i] + grad * gelub_dout[i];
}

// WGSL has no erf: Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7) on a = |x|/√2,
// erf(a) = 1 − p(t)·e^(−a²), t = 1/(1 + 0.3275911·a), with x's sign put back. Returns
// (erf(x/√2), e^(−x²/2)): the backward's Gaussian comes free.
const SQRT_HALF: f32 = 0.7071067811865476;
const INV_SQRT_2PI: f32 = 0.3989422804014327;
fn erf_and_gauss(x: f32) -> vec2<f32> {
  let a = abs(x) * SQRT_HALF;
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let p = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  let g = exp(-a * a);
  return vec2<f32>(sign(x) * (1.0 - p * g), g);
}

@compute @workgroup_size(256)
fn gelu_erf_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= gerf_n) { return; }
  let x = gerf_x[i];
  gerf_out[i] = 0.5 * x * (1.0 + erf_and_gauss(x).x);
}

@compute @workgroup_size(256)
fn gelu_erf_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= gerfb_n) { return; }
  let x = gerfb_x[i];
  let eg = erf_and_gauss(x);
  let grad = 0.5 * (1.0 + eg.x) + x * INV_SQRT_2PI * eg.y;
  gerfb_dx[i] = gerfb_dx[i] + grad * gerfb_dout[i];
}

@compute @workgroup_size(256)
fn swiglu_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= swi_n) { return; }
  let g = swi_gate[i];
  swi_out[i] = g * sigmoid(g) * swi_up[i];
}

@compute @workgroup_size(256)
fn swiglu_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= swib_n) { return; }
  let g = swib_gate[i];
  let sg = sigmoid(g);
  let dsilu = sg * (1.0 + g * (1.0 - sg));
  let d = swib_dout[i];
  swib_dgate[i] = swib_dgate[i] + d * swib_up[i] * dsilu;
  swib_dup[i] = swib_dup[i] + d * (g * sg);
}
