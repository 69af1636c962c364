// The residual add, forward and backward.
// Bindings in the fixture's order (outputs first, then inputs, then the count n as a uniform);
// backward kernels accumulate (+=) into their gradients. One thread per element; flat_id is the
// prelude's (prelude/elementwise.wgsl).

// Each entry point declares its own names; the numbers repeat across entry points.
@group(0) @binding(0) var<storage, read_write> res_out: array<f32>;
@group(0) @binding(1) var<storage, read> res_a: array<f32>;
@group(0) @binding(2) var<storage, read> res_b: array<f32>;
@group(0) @binding(3) var<uniform> res_n: u32;

@group(0) @binding(0) var<storage, read_write> resb_da: array<f32>;
@group(0) @binding(1) var<storage, read_write> resb_db: array<f32>;
@group(0) @binding(2) var<storage, read> resb_dout: array<f32>;
@group(0) @binding(3) var<uniform> resb_n: u32;

@compute @workgroup_size(256)
fn residual_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= res_n) { return; }
  res_out[i] = res_a[i] + res_b[i];
}

@compute @workgroup_size(256)
fn residual_backward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= resb_n) { return; }
  let d = resb_dout[i];
  resb_da[i] = resb_da[i] + d;
  resb_db[i] = resb_db[i] + d;
}
