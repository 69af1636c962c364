// The optimizer kernels' prelude (registry.mjs puts it, after prelude/elementwise.wgsl, before
// optimizer.wgsl, optimizer_f16.wgsl and, with prelude/bf16.wgsl, the bf16 variants): the
// workgroup size, the finiteness test and the AdamW element every AdamW variant shares.

// The workgroup size, that of the grid flat_id (prelude/elementwise.wgsl) indexes.
const WG: u32 = 256u;

// WGSL lets a compiler assume no NaN or Inf exist, so the test reads the exponent bits.
fn is_finite(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// ---- the AdamW element, shared by every variant --------------------------------------

// The new weight, the moments, and the step itself, delta = w - w_new (bf16-kahan adds it to a
// compensation rather than to w).
struct Step { w: f32, m: f32, v: f32, delta: f32 }

// Every operation rounded on its own, in this order (the reference's): the clip, the moments,
// the bias corrections as products with reciprocals, the decoupled weight decay.
fn adamw_element(w: f32, g: f32, m: f32, v: f32, clip: f32, hp: vec4<f32>, bias: vec4<f32>) -> Step {
  let lr = hp.x;
  let beta1 = hp.y;
  let beta2 = hp.z;
  let wd = hp.w;
  let grad = select(0.0, g * clip, is_finite(g));
  let m_new = beta1 * m + (1.0 - beta1) * grad;
  let v_new = beta2 * v + (1.0 - beta2) * grad * grad;
  let m_hat = m_new * (1.0 / max(1.0 - bias.x, 1e-12));
  let v_hat = v_new * (1.0 / max(1.0 - bias.y, 1e-12));
  let delta = lr * (m_hat / (sqrt(v_hat) + bias.z) + wd * w);
  return Step(w - delta, m_new, v_new, delta);
}
