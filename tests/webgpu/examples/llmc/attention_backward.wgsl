// llm.c's attention_backward(dinp, dpreatt, datt, dout, inp, att, B, T, C, NH): the gradient of
// attention_forward into dinp = dq | dk | dv (accumulated, +=), four kernels in order:
//   attention_datt_kernel                  datt[b,h,t,t2] = dout_t·v_t2             (t2 ≤ t)
//   softmax_autoregressive_backward_kernel dpreatt[b,h,t,t2] = att·(datt - Σ_t3 att·datt) / √hs
//   attention_dquery_kernel                dq_t  += Σ_{t2 ≤ t} dpreatt[t,t2]·k_t2
//   attention_dkey_dvalue_kernel           dk_t2 += Σ_{t ≥ t2} dpreatt[t,t2]·q_t
//                                          dv_t2 += Σ_{t ≥ t2} att[t,t2]·dout_t
// The softmax's 1/√hs is folded into dpreatt, as llm.c's CUDA softmax backward does. The last
// three are the products llm.c hands to cuBLAS (dq = dpreatt·k, dk = dpreattᵀ·q, dv = attᵀ·dout);
// here each thread gathers one element over t in order, so no element has two writers (WGSL has
// no float atomics). Layouts as attention_forward's; dpreatt and datt are [B, NH, T, T].
// Conventions: storage read_write, sizes in `Params` bound last.

struct Params {
  B: u32,
  T: u32,
  C: u32,
  NH: u32,
}

@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(1) var<storage, read_write> dpreatt: array<f32>;
@group(0) @binding(2) var<storage, read_write> datt: array<f32>;
@group(0) @binding(3) var<storage, read_write> dout: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> att: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

// One thread per (b, h, t, t2).
@compute @workgroup_size(256)
fn attention_datt_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let NH = params.NH;
  let idx = gid.x;
  if (idx >= B * NH * T * T) { return; }
  let t2 = idx % T;
  let t = (idx / T) % T;
  if (t2 > t) { return; }
  let h = (idx / (T * T)) % NH;
  let b = idx / (NH * T * T);
  let hs = C / NH;
  let C3 = 3u * C;
  let v = b * T * C3 + t2 * C3 + h * hs + 2u * C;
  let d = (b * T + t) * C + h * hs;
  var val = 0.0;
  for (var i = 0u; i < hs; i++) {
    val += inp[v + i] * dout[d + i];
  }
  datt[idx] = val;
}

// One thread per (b, h, t) row.
@compute @workgroup_size(256)
fn softmax_autoregressive_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let T = params.T;
  let row = gid.x;
  if (row >= params.B * params.NH * T) { return; }
  let t = row % T;
  let base = row * T;
  let scale = 1.0 / sqrt(f32(params.C / params.NH));
  var local_sum = 0.0;
  for (var t2 = 0u; t2 <= t; t2++) {
    local_sum += att[base + t2] * datt[base + t2];
  }
  for (var t3 = 0u; t3 <= t; t3++) {
    dpreatt[base + t3] = scale * att[base + t3] * (datt[base + t3] - local_sum);
  }
}

// One thread per dq element (b, t, h·hs + i).
@compute @workgroup_size(256)
fn attention_dquery_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let NH = params.NH;
  let idx = gid.x;
  if (idx >= B * T * C) { return; }
  let c = idx % C;
  let t = (idx / C) % T;
  let b = idx / (T * C);
  let h = c / (C / NH);
  let C3 = 3u * C;
  let prow = ((b * NH + h) * T + t) * T;
  let dq = b * T * C3 + t * C3 + c;
  var val = dinp[dq];
  for (var t2 = 0u; t2 <= t; t2++) {
    val += dpreatt[prow + t2] * inp[b * T * C3 + t2 * C3 + C + c];
  }
  dinp[dq] = val;
}

// One thread per (b, t2, h·hs + i): that position's dk and dv element.
@compute @workgroup_size(256)
fn attention_dkey_dvalue_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let B = params.B;
  let T = params.T;
  let C = params.C;
  let NH = params.NH;
  let idx = gid.x;
  if (idx >= B * T * C) { return; }
  let c = idx % C;
  let t2 = (idx / C) % T;
  let b = idx / (T * C);
  let h = c / (C / NH);
  let C3 = 3u * C;
  let dk = b * T * C3 + t2 * C3 + C + c;
  let dv = dk + C;
  var dkval = dinp[dk];
  var dvval = dinp[dv];
  for (var t = t2; t < T; t++) {
    let a = ((b * NH + h) * T + t) * T + t2;
    dkval += dpreatt[a] * inp[b * T * C3 + t * C3 + c];
    dvval += att[a] * dout[(b * T + t) * C + c];
  }
  dinp[dk] = dkval;
  dinp[dv] = dvval;
}
