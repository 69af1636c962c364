// linear_forward, 4×4 register-blocked: a 16×16 workgroup computes a 64×64 block of out, each
// thread a 4×4 sub-block held in registers, from 64×16 tiles of inp and w staged in workgroup
// memory per step of 16 along k (zero-padded at the edges). Same bindings as linear.wgsl's
// linear_forward.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> inp: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<uniform> N: u32;
@group(0) @binding(5) var<uniform> K: u32;
@group(0) @binding(6) var<uniform> O: u32;

const BK: u32 = 16u;
const BM: u32 = 64u;
var<workgroup> tile_a: array<array<f32, 16>, 64>;  // [row n][k]
var<workgroup> tile_b: array<array<f32, 16>, 64>;  // [column o][k]

@compute @workgroup_size(16, 16)
fn linear_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
                  @builtin(local_invocation_index) tid: u32) {
  let n0 = wid.y * BM;
  let o0 = wid.x * BM;
  var acc: array<array<f32, 4>, 4>;
  for (var k0 = 0u; k0 < K; k0 += BK) {
    // 256 threads load 64×16 elements of each tile, 4 each.
    for (var j = 0u; j < 4u; j++) {
      let e = tid + j * 256u;
      let r = e / BK;
      let k = k0 + e % BK;
      tile_a[r][e % BK] = select(0.0, inp[(n0 + r) * K + k], n0 + r < N && k < K);
      tile_b[r][e % BK] = select(0.0, w[(o0 + r) * K + k], o0 + r < O && k < K);
    }
    workgroupBarrier();
    for (var k = 0u; k < BK; k++) {
      var a: array<f32, 4>;
      var bv: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        a[i] = tile_a[lid.y * 4u + i][k];
        bv[i] = tile_b[lid.x * 4u + i][k];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) { acc[i][j] += a[i] * bv[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let n = n0 + lid.y * 4u + i;
    for (var j = 0u; j < 4u; j++) {
      let o = o0 + lid.x * 4u + j;
      if (n < N && o < O) { out[n * O + o] = acc[i][j] + b[o]; }
    }
  }
}
