// The linear layer's three products in bf16 (ops/linear_bf16.h): bf16 operands, two per u32
// word (prelude/bf16.wgsl), f32 outputs, in the canonical order of ops/matmul_bf16.h, so that the
// outputs are the CPU's bit for bit:
//   c = init (flushed); per block of 32 r (the last padded with zeros):
//     e = +0, e = fma(a_r, b_r, e) over the block's even r; o likewise over its odd r;
//     c = c + (e + o)                                    (every fma and add flushed)
// One thread per output (p, m), 16×16 a workgroup. Each product X (lf forward, bd backward-data,
// bw backward-weight) binds the kernel's bindings in the record's order, scalars last, and
// gives the template below its operands: X_M/X_P/X_R the sizes (C is M×P, r runs over R), X_A
// and X_B the operands (0 past R: the padding), X_init the start, X_store the result, X_extra
// what else thread (p, m) does (bw: db at p = 0, f32, rows in order: linear.h's bias_backward).

@group(0) @binding(0) var<storage, read_write> lf_out: array<f32>;
@group(0) @binding(1) var<storage, read> lf_inp16: array<u32>;
@group(0) @binding(2) var<storage, read> lf_w16: array<u32>;
@group(0) @binding(3) var<storage, read> lf_b: array<f32>;
@group(0) @binding(4) var<uniform> lf_N: u32;
@group(0) @binding(5) var<uniform> lf_K: u32;
@group(0) @binding(6) var<uniform> lf_O: u32;
fn lf_M() -> u32 { return lf_N; }
fn lf_P() -> u32 { return lf_O; }
fn lf_R() -> u32 { return lf_K; }
fn lf_A(m: u32, r: u32) -> f32 {
  let i = m * lf_K + r;
  return select(0.0, bf16_unpack(lf_inp16[i >> 1u], i), r < lf_K);
}
fn lf_B(r: u32, p: u32) -> f32 {
  let i = p * lf_K + r;
  return select(0.0, bf16_unpack(lf_w16[i >> 1u], i), r < lf_K);
}
fn lf_init(m: u32, p: u32) -> f32 { return lf_b[p]; }
fn lf_store(m: u32, p: u32, c: f32) { lf_out[m * lf_O + p] = c; }
fn lf_extra(m: u32, p: u32) {}

@group(0) @binding(0) var<storage, read_write> bd_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bd_dout16: array<u32>;
@group(0) @binding(2) var<storage, read> bd_w16: array<u32>;
@group(0) @binding(3) var<uniform> bd_N: u32;
@group(0) @binding(4) var<uniform> bd_K: u32;
@group(0) @binding(5) var<uniform> bd_O: u32;
fn bd_M() -> u32 { return bd_N; }
fn bd_P() -> u32 { return bd_K; }
fn bd_R() -> u32 { return bd_O; }
fn bd_A(m: u32, r: u32) -> f32 {
  let i = m * bd_O + r;
  return select(0.0, bf16_unpack(bd_dout16[i >> 1u], i), r < bd_O);
}
fn bd_B(r: u32, p: u32) -> f32 {
  let i = r * bd_K + p;
  return select(0.0, bf16_unpack(bd_w16[i >> 1u], i), r < bd_O);
}
fn bd_init(m: u32, p: u32) -> f32 { return bd_dinp[m * bd_K + p]; }
fn bd_store(m: u32, p: u32, c: f32) { bd_dinp[m * bd_K + p] = c; }
fn bd_extra(m: u32, p: u32) {}

@group(0) @binding(0) var<storage, read_write> bw_dw: array<f32>;
@group(0) @binding(1) var<storage, read_write> bw_db: array<f32>;
@group(0) @binding(2) var<storage, read> bw_dout: array<f32>;
@group(0) @binding(3) var<storage, read> bw_dout16: array<u32>;
@group(0) @binding(4) var<storage, read> bw_inp16: array<u32>;
@group(0) @binding(5) var<uniform> bw_N: u32;
@group(0) @binding(6) var<uniform> bw_K: u32;
@group(0) @binding(7) var<uniform> bw_O: u32;
fn bw_M() -> u32 { return bw_O; }
fn bw_P() -> u32 { return bw_K; }
fn bw_R() -> u32 { return bw_N; }
fn bw_A(m: u32, r: u32) -> f32 {
  let i = r * bw_O + m;
  return select(0.0, bf16_unpack(bw_dout16[i >> 1u], i), r < bw_N);
}
fn bw_B(r: u32, p: u32) -> f32 {
  let i = r * bw_K + p;
  return select(0.0, bf16_unpack(bw_inp16[i >> 1u], i), r < bw_N);
}
fn bw_init(m: u32, p: u32) -> f32 { return bw_dw[m * bw_K + p]; }
fn bw_store(m: u32, p: u32, c: f32) { bw_dw[m * bw_K + p] = c; }
fn bw_extra(m: u32, p: u32) {
  if (p != 0u) { return; }
  var s = bw_db[m];
  for (var r = 0u; r < bw_N; r++) { s += bw_dout[r * bw_O + m]; }
  bw_db[m] = s;
}

//#template
@compute @workgroup_size(16, 16)
fn {{ENTRY}}(@builtin(global_invocation_id) gid: vec3<u32>) {
  let p = gid.x;
  let m = gid.y;
  if (p >= {{X}}_P() || m >= {{X}}_M()) { return; }
  let R = {{X}}_R();
  var c = flush({{X}}_init(m, p));
  for (var r0 = 0u; r0 < R; r0 += 32u) {
    var e = 0.0;
    var o = 0.0;
    for (var r = r0; r < r0 + 32u; r += 2u) {
      e = fma_flush({{X}}_A(m, r), {{X}}_B(r, p), e);
      o = fma_flush({{X}}_A(m, r + 1u), {{X}}_B(r + 1u, p), o);
    }
    c = add_flush(c, add_flush(e, o));
  }
  {{X}}_store(m, p, c);
  {{X}}_extra(m, p);
}
//#end
