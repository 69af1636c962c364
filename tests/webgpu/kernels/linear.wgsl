// The linear products, naive form: one thread per output element, the inner sum in r order
// (k for the forward, o for the data gradient, n for the weight gradient, as the reference).
// The products' bindings and operands are prelude/linear.wgsl's; the template below is written
// once per product (registry.mjs linearTemplate: X the product's prefix, ENTRY its entry point).
// linear_tiled.wgsl and linear_reg4x4.wgsl hold the 16×16-tile and 4×4 register-blocked forms.

//#template
// Thread (p, m): C[m,p]; for linear_backward_weight the threads of column p = 0 also sum row m
// of A (db[o]).
@compute @workgroup_size(16, 16)
fn {{ENTRY}}(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = gid.x;
  let m = gid.y;
  if (p >= {{X}}_P() || m >= {{X}}_M()) { return; }
  let R = {{X}}_R();
  var acc: f32 = 0.0;
  for (var r = 0u; r < R; r++) { acc += {{X}}_A(m, r) * {{X}}_B(r, p); }
  {{X}}_store(m, p, acc);
  if ({{X}}_ROWSUM && p == 0u) {
    var s: f32 = 0.0;
    for (var r = 0u; r < R; r++) { s += {{X}}_A(m, r); }
    {{X}}_store_rowsum(m, s);
  }
}
//#end
