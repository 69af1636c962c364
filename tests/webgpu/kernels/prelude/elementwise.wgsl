// The prelude of the twins dispatched one thread per element on registry.mjs's groups() grid
// (cast.wgsl, residual.wgsl, activation.wgsl, optimizer.wgsl): 256 threads a workgroup, and a
// second grid dimension once n needs more than 65535 workgroups, so the element index is
// gid.x + gid.y · (the row's thread count).
fn flat_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
  return gid.x + gid.y * nwg.x * 256u;
}
