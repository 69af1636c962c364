// llm.c's gelu_backward(dinp, inp, dout, N): the derivative of gelu_forward's tanh GELU,
//   local_grad = ½·(1 + tanh u) + ½·x·sech²(u)·√(2/π)·(1 + 3·0.044715·x²)
//   dinp += local_grad·dout                      (accumulated, as llm.c's backward kernels)
// Conventions: storage read_write, sizes in `Params` bound last; one thread per element.

const GELU_SCALING_FACTOR: f32 = 0.7978845608028654;  // √(2/π)

struct Params {
  N: u32,
}

@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(1) var<storage, read_write> inp: array<f32>;
@group(0) @binding(2) var<storage, read_write> dout: array<f32>;
@group(0) @binding(3) var<uniform> params: Params;

@compute @workgroup_size(256)
fn gelu_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= params.N) { return; }
  let x = inp[i];
  let cube = 0.044715 * x * x * x;
  let tanh_arg = GELU_SCALING_FACTOR * (x + cube);
  // tanh clamped as in gelu_forward (NaN-free, same result); cosh is not: it overflows to +Inf
  // for large |u|, where sech² = 1/cosh² correctly becomes 0.
  let tanh_out = tanh(clamp(tanh_arg, -10.0, 10.0));
  let coshf_out = cosh(tanh_arg);
  let sech_out = 1.0 / (coshf_out * coshf_out);
  let local_grad = 0.5 * (1.0 + tanh_out) + x * 0.5 * sech_out * GELU_SCALING_FACTOR * (1.0 + 3.0 * 0.044715 * x * x);
  dinp[i] += local_grad * dout[i];
}
