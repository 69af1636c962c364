// The WGSL twins the fixture runner uses: fixture name → {file, entry, dispatch, ...} (the
// fields are described in runner.mjs). A backend tests its own kernels by passing its own
// registry (or a copy of this one with entries replaced) to runFixtures, or with
// `kernels.mjs --registry FILE.mjs`, whose default export is such an object; docs/webgpu.md
// shows how.
const groups = (n, per = 256) => {
  const g = Math.ceil(n / per);
  return g <= 65535 ? [g, 1] : [65535, Math.ceil(g / 65535)];
};

const elementwise = (file, entry, count = 'n') => ({ file, entry, dispatch: (p) => groups(p[count]) });

export function makeRegistry() {
  return {
    cast_f32_to_f16: elementwise('cast.wgsl', 'cast_f32_to_f16'),
    cast_f16_to_f32: elementwise('cast.wgsl', 'cast_f16_to_f32'),
    residual_forward: elementwise('pointwise.wgsl', 'residual_forward'),
    residual_backward: elementwise('pointwise.wgsl', 'residual_backward'),
    gelu_forward: elementwise('pointwise.wgsl', 'gelu_forward'),
    gelu_backward: elementwise('pointwise.wgsl', 'gelu_backward'),
    swiglu_forward: elementwise('pointwise.wgsl', 'swiglu_forward'),
    swiglu_backward: elementwise('pointwise.wgsl', 'swiglu_backward'),
    reduce_norm_sq: elementwise('optimizer.wgsl', 'reduce_norm_sq'),
    finalize_grad_stats: { file: 'optimizer.wgsl', entry: 'finalize_grad_stats', dispatch: () => [1] },
    adamw_update: { ...elementwise('optimizer.wgsl', 'adamw_update', 'size'), uniforms: ['hp', 'bias'] },
    adamw_update_f16: { ...elementwise('optimizer.wgsl', 'adamw_update_f16', 'size'), uniforms: ['hp', 'bias'] },
    adamw_8bit_update: { ...elementwise('optimizer.wgsl', 'adamw_8bit_update', 'size'), uniforms: ['hp', 'bias'] },
  };
}

export default makeRegistry();
