// The attention family's prelude (registry.mjs puts it before attention.wgsl and
// attention_fused.wgsl): the bindings both forms share, the (b, h) a thread works on, and the
// index helpers. qkv is [B, T, 3C] (q, k, v of head h at channels h·hs.. of each third), out and
// dout [B, T, C]. Binding 1 of the forward and 3 of the backward are the form's own: the
// probabilities att [B, NH, T, T] (materialised) or their rows' logsumexp lse [B, NH, T] (fused),
// both indexed by the row (b, h, t) of score_row; the fused backward also binds out, at 8.

@group(0) @binding(0) var<storage, read_write> af_out: array<f32>;
@group(0) @binding(2) var<storage, read> af_qkv: array<f32>;
@group(0) @binding(3) var<uniform> af_B: u32;
@group(0) @binding(4) var<uniform> af_T: u32;
@group(0) @binding(5) var<uniform> af_C: u32;
@group(0) @binding(6) var<uniform> af_NH: u32;

@group(0) @binding(0) var<storage, read_write> ab_dqkv: array<f32>;
@group(0) @binding(1) var<storage, read> ab_dout: array<f32>;
@group(0) @binding(2) var<storage, read> ab_qkv: array<f32>;
@group(0) @binding(4) var<uniform> ab_B: u32;
@group(0) @binding(5) var<uniform> ab_T: u32;
@group(0) @binding(6) var<uniform> ab_C: u32;
@group(0) @binding(7) var<uniform> ab_NH: u32;

// The lowest finite f32: the running maximum's start.
const NEG_MAX: f32 = -0x1.fffffep+127f;

// Head h of batch b, with the sizes and the logits' scale 1/√hs.
struct Head { b: u32, h: u32, T: u32, C: u32, NH: u32, hs: u32, scale: f32 }

// The head of thread i, one thread per (b, h, t) with t = i % T fastest; i < B·NH·T.
fn head_of(i: u32, T: u32, C: u32, NH: u32) -> Head {
  let hs = C / NH;
  return Head(i / (T * NH), (i / T) % NH, T, C, NH, hs, 1.0 / sqrt(f32(hs)));
}

// Where q (part 0), k (1) or v (2) of position t starts in qkv.
fn qkv_at(x: Head, t: u32, part: u32) -> u32 {
  return (x.b * x.T + t) * 3u * x.C + part * x.C + x.h * x.hs;
}

// Where position t's head starts in out and dout.
fn out_at(x: Head, t: u32) -> u32 {
  return (x.b * x.T + t) * x.C + x.h * x.hs;
}

// The row (b, h, t): lse's element, and att's row of T (times T).
fn score_row(x: Head, t: u32) -> u32 {
  return (x.b * x.NH + x.h) * x.T + t;
}
