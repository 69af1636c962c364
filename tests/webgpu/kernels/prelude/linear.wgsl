// The linear family's prelude (registry.mjs puts it before linear.wgsl, linear_tiled.wgsl and
// linear_reg4x4.wgsl): the f32 products' bindings, in the fixtures' order with N, K, O as u32
// uniforms, and one interface per product through which each form's template
// (`//#template` in those files) reads it. Every product is C[m,p] (+)= Σ_r A[m,r]·B[r,p]:
//   linear_forward(_f16)        prefix lf (lh)  m = n, p = o, r = k: A = inp[n,k], B = w[o,k];
//                               out[n,o] = sum + b[o]              (lh: w in f16, widened exactly)
//   linear_backward_data(_f16)  prefix bd (bh)  m = n, p = k, r = o: A = dout[n,o], B = w[o,k];
//                               dinp[n,k] += sum
//   linear_backward_weight      prefix bw       m = o, p = k, r = n: A = dout[n,o], B = inp[n,k];
//                               dw[o,k] += sum, and db[o] += Σ_n dout[n,o] (the row sums of A)
// Per product X: X_M(), X_P(), X_R() the sizes; X_A(m, r), X_B(r, p) the operands as f32;
// X_store(m, p, sum) the output; X_A_R_CONTIGUOUS / X_B_R_CONTIGUOUS whether consecutive r are
// adjacent in memory (a tiled form stages a tile with consecutive threads along the contiguous
// axis); X_ROWSUM whether the product also writes A's row sums, through X_store_rowsum(m, s)
// (a no-op for the four products without, so that one template serves all five). The two
// products that read the f16 mirror (lh, bh) are in linear_f16.wgsl, a module of their own, so
// that the f32 ones compile on an adapter without shader-f16.
@group(0) @binding(0) var<storage, read_write> lf_out: array<f32>;
@group(0) @binding(1) var<storage, read> lf_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lf_w: array<f32>;
@group(0) @binding(3) var<storage, read> lf_b: array<f32>;
@group(0) @binding(4) var<uniform> lf_N: u32;
@group(0) @binding(5) var<uniform> lf_K: u32;
@group(0) @binding(6) var<uniform> lf_O: u32;
fn lf_M() -> u32 { return lf_N; }
fn lf_P() -> u32 { return lf_O; }
fn lf_R() -> u32 { return lf_K; }
fn lf_A(m: u32, r: u32) -> f32 { return lf_inp[m * lf_K + r]; }
fn lf_B(r: u32, p: u32) -> f32 { return lf_w[p * lf_K + r]; }
fn lf_store(m: u32, p: u32, sum: f32) { lf_out[m * lf_O + p] = sum + lf_b[p]; }
const lf_A_R_CONTIGUOUS = true;
const lf_B_R_CONTIGUOUS = true;
const lf_ROWSUM = false;
fn lf_store_rowsum(m: u32, s: f32) {}

@group(0) @binding(0) var<storage, read_write> bd_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bd_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bd_w: array<f32>;
@group(0) @binding(3) var<uniform> bd_N: u32;
@group(0) @binding(4) var<uniform> bd_K: u32;
@group(0) @binding(5) var<uniform> bd_O: u32;
fn bd_M() -> u32 { return bd_N; }
fn bd_P() -> u32 { return bd_K; }
fn bd_R() -> u32 { return bd_O; }
fn bd_A(m: u32, r: u32) -> f32 { return bd_dout[m * bd_O + r]; }
fn bd_B(r: u32, p: u32) -> f32 { return bd_w[r * bd_K + p]; }
fn bd_store(m: u32, p: u32, sum: f32) { bd_dinp[m * bd_K + p] += sum; }
const bd_A_R_CONTIGUOUS = true;
const bd_B_R_CONTIGUOUS = false;
const bd_ROWSUM = false;
fn bd_store_rowsum(m: u32, s: f32) {}

@group(0) @binding(0) var<storage, read_write> bw_dw: array<f32>;
@group(0) @binding(1) var<storage, read_write> bw_db: array<f32>;
@group(0) @binding(2) var<storage, read> bw_dout: array<f32>;
@group(0) @binding(3) var<storage, read> bw_inp: array<f32>;
@group(0) @binding(4) var<uniform> bw_N: u32;
@group(0) @binding(5) var<uniform> bw_K: u32;
@group(0) @binding(6) var<uniform> bw_O: u32;
fn bw_M() -> u32 { return bw_O; }
fn bw_P() -> u32 { return bw_K; }
fn bw_R() -> u32 { return bw_N; }
fn bw_A(m: u32, r: u32) -> f32 { return bw_dout[r * bw_O + m]; }
fn bw_B(r: u32, p: u32) -> f32 { return bw_inp[r * bw_K + p]; }
fn bw_store(m: u32, p: u32, sum: f32) { bw_dw[m * bw_K + p] += sum; }
const bw_A_R_CONTIGUOUS = false;
const bw_B_R_CONTIGUOUS = false;
const bw_ROWSUM = true;
fn bw_store_rowsum(m: u32, s: f32) { bw_db[m] += s; }
