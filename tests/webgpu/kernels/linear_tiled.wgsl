// The linear products, workgroup-shared tiles: each is C[m,p] (+)= Σ_r A[m,r]·B[r,p], and a
// 16×16 workgroup computes a 16×16 block of C, staging 16×16 tiles of A and B in workgroup memory
// for each step of 16 along r (zero-padded at the edges, so any N, K, O works). The sum runs in
// r order, as in the naive form. Entry points and bindings as linear.wgsl's:
//   linear_forward(_f16)        m = n, p = o, r = k: A = inp[n,k], B = w[o,k]
//   linear_backward_data(_f16)  m = n, p = k, r = o: A = dout[n,o], B = w[o,k]
//   linear_backward_weight      m = o, p = k, r = n: A = dout[n,o], B = inp[n,k]; db[o] from
//                               the A tiles, summed by the threads of the first block column
enable f16;

const TILE: u32 = 16u;
var<workgroup> tile_a: array<array<f32, 16>, 16>;  // [row m][r]
var<workgroup> tile_b: array<array<f32, 16>, 16>;  // [r][column p]

// One step along r: this thread's dot product over the staged tiles.
fn tile_step(lid: vec3<u32>, acc: f32) -> f32 {
  var s = acc;
  for (var r = 0u; r < TILE; r++) { s += tile_a[lid.y][r] * tile_b[r][lid.x]; }
  return s;
}

@group(0) @binding(0) var<storage, read_write> lf_out: array<f32>;
@group(0) @binding(1) var<storage, read> lf_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lf_w: array<f32>;
@group(0) @binding(3) var<storage, read> lf_b: array<f32>;
@group(0) @binding(4) var<uniform> lf_N: u32;
@group(0) @binding(5) var<uniform> lf_K: u32;
@group(0) @binding(6) var<uniform> lf_O: u32;

@compute @workgroup_size(16, 16)
fn linear_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let K = lf_K;
  let n = wid.y * TILE + lid.y;
  let o = wid.x * TILE + lid.x;
  let ob = wid.x * TILE + lid.y;  // the w row this thread stages
  var acc: f32 = 0.0;
  for (var k0 = 0u; k0 < K; k0 += TILE) {
    tile_a[lid.y][lid.x] = select(0.0, lf_inp[n * K + k0 + lid.x], n < lf_N && k0 + lid.x < K);
    tile_b[lid.x][lid.y] = select(0.0, lf_w[ob * K + k0 + lid.x], ob < lf_O && k0 + lid.x < K);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    workgroupBarrier();
  }
  if (n < lf_N && o < lf_O) { lf_out[n * lf_O + o] = acc + lf_b[o]; }
}

@group(0) @binding(0) var<storage, read_write> lh_out: array<f32>;
@group(0) @binding(1) var<storage, read> lh_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lh_w16: array<f16>;
@group(0) @binding(3) var<storage, read> lh_b: array<f32>;
@group(0) @binding(4) var<uniform> lh_N: u32;
@group(0) @binding(5) var<uniform> lh_K: u32;
@group(0) @binding(6) var<uniform> lh_O: u32;

@compute @workgroup_size(16, 16)
fn linear_forward_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let K = lh_K;
  let n = wid.y * TILE + lid.y;
  let o = wid.x * TILE + lid.x;
  let ob = wid.x * TILE + lid.y;
  var acc: f32 = 0.0;
  for (var k0 = 0u; k0 < K; k0 += TILE) {
    tile_a[lid.y][lid.x] = select(0.0, lh_inp[n * K + k0 + lid.x], n < lh_N && k0 + lid.x < K);
    tile_b[lid.x][lid.y] = select(0.0, f32(lh_w16[ob * K + k0 + lid.x]), ob < lh_O && k0 + lid.x < K);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    workgroupBarrier();
  }
  if (n < lh_N && o < lh_O) { lh_out[n * lh_O + o] = acc + lh_b[o]; }
}

@group(0) @binding(0) var<storage, read_write> bd_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bd_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bd_w: array<f32>;
@group(0) @binding(3) var<uniform> bd_N: u32;
@group(0) @binding(4) var<uniform> bd_K: u32;
@group(0) @binding(5) var<uniform> bd_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let K = bd_K;
  let O = bd_O;
  let n = wid.y * TILE + lid.y;
  let k = wid.x * TILE + lid.x;
  var acc: f32 = 0.0;
  for (var o0 = 0u; o0 < O; o0 += TILE) {
    tile_a[lid.y][lid.x] = select(0.0, bd_dout[n * O + o0 + lid.x], n < bd_N && o0 + lid.x < O);
    tile_b[lid.y][lid.x] = select(0.0, bd_w[(o0 + lid.y) * K + k], o0 + lid.y < O && k < K);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    workgroupBarrier();
  }
  if (n < bd_N && k < K) { bd_dinp[n * K + k] += acc; }
}

@group(0) @binding(0) var<storage, read_write> bh_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bh_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bh_w16: array<f16>;
@group(0) @binding(3) var<uniform> bh_N: u32;
@group(0) @binding(4) var<uniform> bh_K: u32;
@group(0) @binding(5) var<uniform> bh_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let K = bh_K;
  let O = bh_O;
  let n = wid.y * TILE + lid.y;
  let k = wid.x * TILE + lid.x;
  var acc: f32 = 0.0;
  for (var o0 = 0u; o0 < O; o0 += TILE) {
    tile_a[lid.y][lid.x] = select(0.0, bh_dout[n * O + o0 + lid.x], n < bh_N && o0 + lid.x < O);
    tile_b[lid.y][lid.x] = select(0.0, f32(bh_w16[(o0 + lid.y) * K + k]), o0 + lid.y < O && k < K);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    workgroupBarrier();
  }
  if (n < bh_N && k < K) { bh_dinp[n * K + k] += acc; }
}

@group(0) @binding(0) var<storage, read_write> bw_dw: array<f32>;
@group(0) @binding(1) var<storage, read_write> bw_db: array<f32>;
@group(0) @binding(2) var<storage, read> bw_dout: array<f32>;
@group(0) @binding(3) var<storage, read> bw_inp: array<f32>;
@group(0) @binding(4) var<uniform> bw_N: u32;
@group(0) @binding(5) var<uniform> bw_K: u32;
@group(0) @binding(6) var<uniform> bw_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let N = bw_N;
  let K = bw_K;
  let O = bw_O;
  let o = wid.y * TILE + lid.y;
  let k = wid.x * TILE + lid.x;
  let oa = wid.y * TILE + lid.x;  // the dout column this thread stages
  var acc: f32 = 0.0;
  var db: f32 = 0.0;
  for (var n0 = 0u; n0 < N; n0 += TILE) {
    tile_a[lid.x][lid.y] = select(0.0, bw_dout[(n0 + lid.y) * O + oa], n0 + lid.y < N && oa < O);
    tile_b[lid.y][lid.x] = select(0.0, bw_inp[(n0 + lid.y) * K + k], n0 + lid.y < N && k < K);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    if (k == 0u) {
      for (var r = 0u; r < TILE; r++) { db += tile_a[lid.y][r]; }
    }
    workgroupBarrier();
  }
  if (o < O && k < K) { bw_dw[o * K + k] += acc; }
  if (o < O && k == 0u) { bw_db[o] += db; }
}
