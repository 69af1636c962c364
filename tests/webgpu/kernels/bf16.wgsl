// cast_f32_to_bf16: dst = bf16(src), the rounding of prelude/bf16.wgsl.
// Bind group: 0 dst (storage, read_write; two bf16 a word), 1 src (storage, read: f32 read as
// its bits, so that no NaN is quieted on the way), 2 n (uniform u32).
// One thread per word of dst, 256 a workgroup, on the elementwise grid (flat_id); the high half
// of the last word of an odd n is written 0.
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<uniform> n: u32;

@compute @workgroup_size(256)
fn cast_f32_to_bf16(@builtin(global_invocation_id) gid: vec3<u32>,
                    @builtin(num_workgroups) nwg: vec3<u32>) {
  let j = flat_id(gid, nwg);
  if (2u * j >= n) { return; }
  let lo = bf16_round_bits(src[2u * j]);
  let hi = select(0u, bf16_round_bits(src[min(2u * j + 1u, n - 1u)]), 2u * j + 1u < n);
  dst[j] = lo | (hi << 16u);
}
