// The linear products, 4×4 register-blocked: each is C[m,p] (+)= Σ_r A[m,r]·B[r,p] (the same
// mappings as linear_tiled.wgsl), and a 16×16 workgroup computes a 64×64 block of C, each thread
// a 4×4 sub-block held in registers, from 64×16 tiles of A and B staged in workgroup memory per
// step of 16 along r (zero-padded at the edges). Each loaded value is used four times from
// registers. The sum runs in r order, as in the naive form. Entry points and bindings as
// linear.wgsl's; linear_backward_weight's db[o] comes from the A tiles, summed by the threads
// of the first block column.
enable f16;

const BK: u32 = 16u;
const BM: u32 = 64u;
var<workgroup> tile_a: array<array<f32, 16>, 64>;  // [row m][r]
var<workgroup> tile_b: array<array<f32, 16>, 64>;  // [column p][r]

// One step along r: this thread's 4×4 block of dot products over the staged tiles.
fn block_step(lid: vec3<u32>, acc: ptr<function, array<array<f32, 4>, 4>>) {
  for (var r = 0u; r < BK; r++) {
    var a: array<f32, 4>;
    var bv: array<f32, 4>;
    for (var i = 0u; i < 4u; i++) {
      a[i] = tile_a[lid.y * 4u + i][r];
      bv[i] = tile_b[lid.x * 4u + i][r];
    }
    for (var i = 0u; i < 4u; i++) {
      for (var j = 0u; j < 4u; j++) { (*acc)[i][j] += a[i] * bv[j]; }
    }
  }
}

// The 4 (row, r) pairs of a 64×16 tile this thread stages: element e = tid + 256·j.
fn stage_row(tid: u32, j: u32) -> u32 { return (tid + j * 256u) / BK; }
fn stage_r(tid: u32, j: u32) -> u32 { return (tid + j * 256u) % BK; }

@group(0) @binding(0) var<storage, read_write> lf_out: array<f32>;
@group(0) @binding(1) var<storage, read> lf_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lf_w: array<f32>;
@group(0) @binding(3) var<storage, read> lf_b: array<f32>;
@group(0) @binding(4) var<uniform> lf_N: u32;
@group(0) @binding(5) var<uniform> lf_K: u32;
@group(0) @binding(6) var<uniform> lf_O: u32;

@compute @workgroup_size(16, 16)
fn linear_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                  @builtin(local_invocation_index) tid: u32) {
  let N = lf_N;
  let K = lf_K;
  let O = lf_O;
  let n0 = wid.y * BM;
  let o0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let k = k0 + stage_r(tid, j);
      tile_a[row][k - k0] = select(0.0, lf_inp[(n0 + row) * K + k], n0 + row < N && k < K);
      tile_b[row][k - k0] = select(0.0, lf_w[(o0 + row) * K + k], o0 + row < O && k < K);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let o = o0 + lid.x * 4u + j;
      if (n < N && o < O) { lf_out[n * O + o] = acc[i][j] + lf_b[o]; }
    }
  }
}

@group(0) @binding(0) var<storage, read_write> lh_out: array<f32>;
@group(0) @binding(1) var<storage, read> lh_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lh_w16: array<f16>;
@group(0) @binding(3) var<storage, read> lh_b: array<f32>;
@group(0) @binding(4) var<uniform> lh_N: u32;
@group(0) @binding(5) var<uniform> lh_K: u32;
@group(0) @binding(6) var<uniform> lh_O: u32;

@compute @workgroup_size(16, 16)
fn linear_forward_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                      @builtin(local_invocation_index) tid: u32) {
  let N = lh_N;
  let K = lh_K;
  let O = lh_O;
  let n0 = wid.y * BM;
  let o0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let k = k0 + stage_r(tid, j);
      tile_a[row][k - k0] = select(0.0, lh_inp[(n0 + row) * K + k], n0 + row < N && k < K);
      tile_b[row][k - k0] = select(0.0, f32(lh_w16[(o0 + row) * K + k]), o0 + row < O && k < K);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let o = o0 + lid.x * 4u + j;
      if (n < N && o < O) { lh_out[n * O + o] = acc[i][j] + lh_b[o]; }
    }
  }
}

@group(0) @binding(0) var<storage, read_write> bd_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bd_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bd_w: array<f32>;
@group(0) @binding(3) var<uniform> bd_N: u32;
@group(0) @binding(4) var<uniform> bd_K: u32;
@group(0) @binding(5) var<uniform> bd_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                        @builtin(local_invocation_index) tid: u32) {
  let N = bd_N;
  let K = bd_K;
  let O = bd_O;
  let n0 = wid.y * BM;
  let k0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  for (var o0 = 0u; o0 < O; o0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let o = o0 + stage_r(tid, j);
      tile_a[row][o - o0] = select(0.0, bd_dout[(n0 + row) * O + o], n0 + row < N && o < O);
      tile_b[row][o - o0] = select(0.0, bd_w[o * K + k0 + row], k0 + row < K && o < O);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let k = k0 + lid.x * 4u + j;
      if (n < N && k < K) { bd_dinp[n * K + k] += acc[i][j]; }
    }
  }
}

@group(0) @binding(0) var<storage, read_write> bh_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bh_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bh_w16: array<f16>;
@group(0) @binding(3) var<uniform> bh_N: u32;
@group(0) @binding(4) var<uniform> bh_K: u32;
@group(0) @binding(5) var<uniform> bh_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_data_f16(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                            @builtin(local_invocation_index) tid: u32) {
  let N = bh_N;
  let K = bh_K;
  let O = bh_O;
  let n0 = wid.y * BM;
  let k0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  for (var o0 = 0u; o0 < O; o0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let o = o0 + stage_r(tid, j);
      tile_a[row][o - o0] = select(0.0, bh_dout[(n0 + row) * O + o], n0 + row < N && o < O);
      tile_b[row][o - o0] = select(0.0, f32(bh_w16[o * K + k0 + row]), k0 + row < K && o < O);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let k = k0 + lid.x * 4u + j;
      if (n < N && k < K) { bh_dinp[n * K + k] += acc[i][j]; }
    }
  }
}

@group(0) @binding(0) var<storage, read_write> bw_dw: array<f32>;
@group(0) @binding(1) var<storage, read_write> bw_db: array<f32>;
@group(0) @binding(2) var<storage, read> bw_dout: array<f32>;
@group(0) @binding(3) var<storage, read> bw_inp: array<f32>;
@group(0) @binding(4) var<uniform> bw_N: u32;
@group(0) @binding(5) var<uniform> bw_K: u32;
@group(0) @binding(6) var<uniform> bw_O: u32;

@compute @workgroup_size(16, 16)
fn linear_backward_weight(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                          @builtin(local_invocation_index) tid: u32) {
  let N = bw_N;
  let K = bw_K;
  let O = bw_O;
  let o0 = wid.y * BM;
  let k0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  var db: array<f32, 4>;
  for (var n0 = 0u; n0 < N; n0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let n = n0 + stage_r(tid, j);
      tile_a[row][n - n0] = select(0.0, bw_dout[n * O + o0 + row], o0 + row < O && n < N);
      tile_b[row][n - n0] = select(0.0, bw_inp[n * K + k0 + row], k0 + row < K && n < N);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    if (k0 + lid.x == 0u) {
      for (var i = 0u; i < 4u; i++) {
        for (var r = 0u; r < BK; r++) { db[i] += tile_a[lid.y * 4u + i][r]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let o = o0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let k = k0 + lid.x * 4u + j;
      if (o < O && k < K) { bw_dw[o * K + k] += acc[i][j]; }
    }
    if (o < O && k0 + lid.x == 0u) { bw_db[o] += db[i]; }
  }
}
