// cast_f32_to_f16 / cast_f16_to_f32: the fp16 weight mirror and its widening.
// Bind group (both): 0 src (storage, read), 1 dst (storage, read_write), 2 n (uniform u32).
// One thread per element, 256 per workgroup; a 2-D grid when n needs more than 65535 groups
// (flat_id: prelude/elementwise.wgsl).
enable f16;

@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f16>;
@group(0) @binding(2) var<uniform> n: u32;

// The widening's variables share binding numbers with the narrowing's: each entry point uses
// one set, which WGSL allows.
@group(0) @binding(0) var<storage, read> src_h: array<f16>;
@group(0) @binding(1) var<storage, read_write> dst_f: array<f32>;

// Saturating: 65520 and above would round to Inf, so clamp to the largest f16 first. The
// conversion itself rounds to nearest, ties to even, on lavapipe (WGSL leaves it open).
@compute @workgroup_size(256)
fn cast_f32_to_f16(@builtin(global_invocation_id) gid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= n) { return; }
  dst[i] = f16(clamp(src[i], -65504.0, 65504.0));
}

// Every f16 is an f32: exact.
@compute @workgroup_size(256)
fn cast_f16_to_f32(@builtin(global_invocation_id) gid: vec3<u32>,
                   @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat_id(gid, nwg);
  if (i >= n) { return; }
  dst_f[i] = f32(src_h[i]);
}
