// The linear products, 4×4 register-blocked: each is C[m,p] (+)= Σ_r A[m,r]·B[r,p]
// (prelude/linear.wgsl), and a 16×16 workgroup computes a 64×64 block of C, each thread a 4×4
// sub-block held in registers, from 64×16 tiles of A and B staged in workgroup memory per
// step of 16 along r (zero-padded at the edges). Each loaded value is used four times from
// registers. The sum runs in r order, as in the naive form. The template below is written once
// per product (prelude/linear.wgsl, registry.mjs linearTemplate); linear_backward_weight's db[o]
// comes from the A tiles, summed by the threads of the first block column.

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

//#template
@compute @workgroup_size(16, 16)
fn {{ENTRY}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
  let M = {{X}}_M();
  let P = {{X}}_P();
  let R = {{X}}_R();
  let m0 = wid.y * BM;
  let p0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  var rowsum: array<f32, 4>;
  for (var r0 = 0u; r0 < R; r0 += BK) {
    for (var j = 0u; j < 4u; j++) {
      let row = stage_row(tid, j);
      let r = r0 + stage_r(tid, j);
      tile_a[row][r - r0] = select(0.0, {{X}}_A(m0 + row, r), m0 + row < M && r < R);
      tile_b[row][r - r0] = select(0.0, {{X}}_B(r, p0 + row), p0 + row < P && r < R);
    }
    workgroupBarrier();
    block_step(lid, &acc);
    if ({{X}}_ROWSUM && p0 + lid.x == 0u) {
      for (var i = 0u; i < 4u; i++) {
        for (var r = 0u; r < BK; r++) { rowsum[i] += tile_a[lid.y * 4u + i][r]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let m = m0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let p = p0 + lid.x * 4u + j;
      if (m < M && p < P) { {{X}}_store(m, p, acc[i][j]); }
    }
    if ({{X}}_ROWSUM && m < M && p0 + lid.x == 0u) { {{X}}_store_rowsum(m, rowsum[i]); }
  }
}
//#end
