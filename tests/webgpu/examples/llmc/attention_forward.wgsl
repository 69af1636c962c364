// llm.c's attention_forward(out, preatt, att, inp, B, T, C, NH): causal multi-head attention as
// llm.c's first CUDA version runs it, three kernels in order:
//   attention_query_key_kernel  preatt[b,h,t,t2] = q_t·k_t2 / √hs       (t2 ≤ t)
//   attention_softmax_kernel    att[b,h,t,:] = softmax over t2 ≤ t of preatt[b,h,t,:], 0 after t
//   attention_value_kernel      out[b,t,h·hs + i] = Σ_{t2 ≤ t} att[b,h,t,t2]·v_t2[i]
// inp [B, T, 3C] holds q | k | v per position, head h owning channels h·hs .. h·hs + hs - 1 of
// each; preatt and att are [B, NH, T, T]; out [B, T, C]. Conventions: storage read_write, sizes
// in `Params` bound last; every kernel binds the whole signature and uses what it needs.

struct Params {
  B: u32,
  T: u32,
  C: u32,
  NH: u32,
}

@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read_write> preatt: array<f32>;
@group(0) @binding(2) var<storage, read_write> att: array<f32>;
@group(0) @binding(3) var<storage, read_write> inp: array<f32>;
@group(0) @binding(4) var<uniform> params: Params;

// One thread per (b, h, t, t2).
@compute @workgroup_size(256)
fn attention_query_key_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let NH = params.NH;
  let idx = gid.x;
  if (idx >= B * NH * T * T) { return; }
  let t2 = idx % T;
  let t = (idx / T) % T;
  // llm.c writes -INFINITY above the diagonal; WGSL has no infinity, and the softmax reads only
  // t2 ≤ t, so those entries are left alone.
  if (t2 > t) { return; }
  let h = (idx / (T * T)) % NH;
  let b = idx / (NH * T * T);
  let hs = C / NH;
  let C3 = 3u * C;
  let q = b * T * C3 + t * C3 + h * hs;
  let k = b * T * C3 + t2 * C3 + h * hs + C;
  var val = 0.0;
  for (var i = 0u; i < hs; i++) {
    val += inp[q + i] * inp[k + i];
  }
  preatt[idx] = val * (1.0 / sqrt(f32(hs)));
}

// One thread per (b, h, t) row.
@compute @workgroup_size(256)
fn attention_softmax_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = params.T;
  let row = gid.x;
  if (row >= params.B * params.NH * T) { return; }
  let t = row % T;
  let base = row * T;
  var maxval = preatt[base];
  for (var t2 = 1u; t2 <= t; t2++) {
    maxval = max(maxval, preatt[base + t2]);
  }
  var expsum = 0.0;
  for (var t2 = 0u; t2 <= t; t2++) {
    let expv = exp(preatt[base + t2] - maxval);
    expsum += expv;
    att[base + t2] = expv;
  }
  let expsum_inv = 1.0 / expsum;
  for (var t2 = 0u; t2 < T; t2++) {
    if (t2 <= t) {
      att[base + t2] *= expsum_inv;
    } else {
      att[base + t2] = 0.0;  // the causal mask, explicit as in llm.c
    }
  }
}

// One thread per output element (b, t, h·hs + i).
@compute @workgroup_size(256)
fn attention_value_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let NH = params.NH;
  let idx = gid.x;
  if (idx >= B * T * C) { return; }
  let c = idx % C;
  let t = (idx / C) % T;
  let b = idx / (T * C);
  let hs = C / NH;
  let h = c / hs;
  let C3 = 3u * C;
  let arow = ((b * NH + h) * T + t) * T;
  var val = 0.0;
  for (var t2 = 0u; t2 <= t; t2++) {
    val += att[arow + t2] * inp[b * T * C3 + t2 * C3 + 2u * C + c];
  }
  out[idx] = val;
}
