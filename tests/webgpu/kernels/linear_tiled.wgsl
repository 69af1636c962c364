// The linear products, workgroup-shared tiles: each is C[m,p] (+)= Σ_r A[m,r]·B[r,p]
// (prelude/linear.wgsl), and a 16×16 workgroup computes a 16×16 block of C, staging 16×16 tiles
// of A and B in workgroup memory for each step of 16 along r (zero-padded at the edges, so any
// N, K, O works). The sum runs in r order, as in the naive form. The template below is written
// once per product (registry.mjs linearTemplate); linear_backward_weight's db[o] comes from the
// A tiles, summed by the threads of the first block column.

const TILE: u32 = 16u;
var<workgroup> tile_a: array<array<f32, 16>, 16>;  // [row m][r]
var<workgroup> tile_b: array<array<f32, 16>, 16>;  // [r][column p]

// One step along r: this thread's dot product over the staged tiles.
fn tile_step(lid: vec3<u32>, acc: f32) -> f32 {
  var s = acc;
  for (var r = 0u; r < TILE; r++) { s += tile_a[lid.y][r] * tile_b[r][lid.x]; }
  return s;
}

// The tile element (row or column, r) a thread stages: consecutive threads (lid.x) walk r when
// the operand is contiguous along r, else the other axis, so that their loads are adjacent.
fn stage_at(lid: vec3<u32>, r_contiguous: bool) -> vec2<u32> {
  return select(vec2<u32>(lid.x, lid.y), vec2<u32>(lid.y, lid.x), r_contiguous);
}

//#template
@compute @workgroup_size(16, 16)
fn {{ENTRY}}(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
  let M = {{X}}_M();
  let P = {{X}}_P();
  let R = {{X}}_R();
  let m = wid.y * TILE + lid.y;
  let p = wid.x * TILE + lid.x;
  let sa = stage_at(lid, {{X}}_A_R_CONTIGUOUS);  // (row of A, r)
  let sb = stage_at(lid, {{X}}_B_R_CONTIGUOUS);  // (column of B, r)
  let am = wid.y * TILE + sa.x;
  let bp = wid.x * TILE + sb.x;
  var acc: f32 = 0.0;
  var rowsum: f32 = 0.0;
  for (var r0 = 0u; r0 < R; r0 += TILE) {
    tile_a[sa.x][sa.y] = select(0.0, {{X}}_A(am, r0 + sa.y), am < M && r0 + sa.y < R);
    tile_b[sb.y][sb.x] = select(0.0, {{X}}_B(r0 + sb.y, bp), bp < P && r0 + sb.y < R);
    workgroupBarrier();
    acc = tile_step(lid, acc);
    if ({{X}}_ROWSUM && p == 0u) {
      for (var r = 0u; r < TILE; r++) { rowsum += tile_a[lid.y][r]; }
    }
    workgroupBarrier();
  }
  if (m < M && p < P) { {{X}}_store(m, p, acc); }
  if ({{X}}_ROWSUM && m < M && p == 0u) { {{X}}_store_rowsum(m, rowsum); }
}
//#end
