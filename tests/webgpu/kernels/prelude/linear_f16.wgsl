// The linear family's f16 prelude: the two products that read the weights' f16 mirror,
// linear_forward_f16 (prefix lh) and linear_backward_data_f16 (prefix bh), with the interface
// prelude/linear.wgsl describes. A module of their own: only these need shader-f16.
enable f16;

@group(0) @binding(0) var<storage, read_write> lh_out: array<f32>;
@group(0) @binding(1) var<storage, read> lh_inp: array<f32>;
@group(0) @binding(2) var<storage, read> lh_w16: array<f16>;
@group(0) @binding(3) var<storage, read> lh_b: array<f32>;
@group(0) @binding(4) var<uniform> lh_N: u32;
@group(0) @binding(5) var<uniform> lh_K: u32;
@group(0) @binding(6) var<uniform> lh_O: u32;
fn lh_M() -> u32 { return lh_N; }
fn lh_P() -> u32 { return lh_O; }
fn lh_R() -> u32 { return lh_K; }
fn lh_A(m: u32, r: u32) -> f32 { return lh_inp[m * lh_K + r]; }
fn lh_B(r: u32, p: u32) -> f32 { return f32(lh_w16[p * lh_K + r]); }
fn lh_store(m: u32, p: u32, sum: f32) { lh_out[m * lh_O + p] = sum + lh_b[p]; }
const lh_A_R_CONTIGUOUS = true;
const lh_B_R_CONTIGUOUS = true;
const lh_ROWSUM = false;
fn lh_store_rowsum(m: u32, s: f32) {}

@group(0) @binding(0) var<storage, read_write> bh_dinp: array<f32>;
@group(0) @binding(1) var<storage, read> bh_dout: array<f32>;
@group(0) @binding(2) var<storage, read> bh_w16: array<f16>;
@group(0) @binding(3) var<uniform> bh_N: u32;
@group(0) @binding(4) var<uniform> bh_K: u32;
@group(0) @binding(5) var<uniform> bh_O: u32;
fn bh_M() -> u32 { return bh_N; }
fn bh_P() -> u32 { return bh_K; }
fn bh_R() -> u32 { return bh_O; }
fn bh_A(m: u32, r: u32) -> f32 { return bh_dout[m * bh_O + r]; }
fn bh_B(r: u32, p: u32) -> f32 { return f32(bh_w16[r * bh_K + p]); }
fn bh_store(m: u32, p: u32, sum: f32) { bh_dinp[m * bh_K + p] += sum; }
const bh_A_R_CONTIGUOUS = true;
const bh_B_R_CONTIGUOUS = false;
const bh_ROWSUM = false;
fn bh_store_rowsum(m: u32, s: f32) {}
