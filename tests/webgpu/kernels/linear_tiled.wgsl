// linear_forward, workgroup-shared tiles: a 16×16 workgroup computes a 16×16 block of out,
// staging 16×16 tiles of inp and w in workgroup memory for each step of 16 along k (zero-padded
// at the edges, so any N, K, O works). Same bindings as linear.wgsl's linear_forward.
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> inp: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<uniform> N: u32;
@group(0) @binding(5) var<uniform> K: u32;
@group(0) @binding(6) var<uniform> O: u32;

const TILE: u32 = 16u;
var<workgroup> tile_a: array<array<f32, 16>, 16>;  // [row n][k]
var<workgroup> tile_b: array<array<f32, 16>, 16>;  // [k][column o]

@compute @workgroup_size(16, 16)
fn linear_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let o = wid.x * TILE + lid.x;
  let n = wid.y * TILE + lid.y;
  var acc: f32 = 0.0;
  for (var k0 = 0u; k0 < K; k0 += TILE) {
    let ka = k0 + lid.x;
    tile_a[lid.y][lid.x] = select(0.0, inp[n * K + ka], n < N && ka < K);
    let kb = k0 + lid.y;
    let ob = wid.x * TILE + lid.x;
    tile_b[lid.y][lid.x] = select(0.0, w[ob * K + kb], ob < O && kb < K);
    workgroupBarrier();
    for (var k = 0u; k < TILE; k++) { acc += tile_a[lid.y][k] * tile_b[k][lid.x]; }
    workgroupBarrier();
  }
  if (n < N && o < O) { out[n * O + o] = acc + b[o]; }
}
