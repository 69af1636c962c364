// The replay's glue kernels (no golden fixture: pure copies, exact): llama's q, k, v packed into
// the [N, 3C] layout the attention kernels read, and the backward's split of dqkv (written, not
// accumulated), as core/model/llama.cpp's pack_qkv / unpack_qkv. One thread per element of q.

@group(0) @binding(0) var<storage, read_write> pk_qkv: array<f32>;
@group(0) @binding(1) var<storage, read> pk_q: array<f32>;
@group(0) @binding(2) var<storage, read> pk_k: array<f32>;
@group(0) @binding(3) var<storage, read> pk_v: array<f32>;
@group(0) @binding(4) var<uniform> pk_N: u32;
@group(0) @binding(5) var<uniform> pk_C: u32;

@compute @workgroup_size(256)
fn pack_qkv(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= pk_N * pk_C) { return; }
  let row = (i / pk_C) * 3u * pk_C + i % pk_C;
  pk_qkv[row] = pk_q[i];
  pk_qkv[row + pk_C] = pk_k[i];
  pk_qkv[row + 2u * pk_C] = pk_v[i];
}

@group(0) @binding(0) var<storage, read_write> up_dq: array<f32>;
@group(0) @binding(1) var<storage, read_write> up_dk: array<f32>;
@group(0) @binding(2) var<storage, read_write> up_dv: array<f32>;
@group(0) @binding(3) var<storage, read> up_dqkv: array<f32>;
@group(0) @binding(4) var<uniform> up_N: u32;
@group(0) @binding(5) var<uniform> up_C: u32;

@compute @workgroup_size(256)
fn unpack_qkv(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= up_N * up_C) { return; }
  let row = (i / up_C) * 3u * up_C + i % up_C;
  up_dq[i] = up_dqkv[row];
  up_dk[i] = up_dqkv[row + up_C];
  up_dv[i] = up_dqkv[row + 2u * up_C];
}
