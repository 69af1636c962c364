// llm.c's matmul_backward(dinp, dweight, dbias, dout, inp, weight, B, T, C, OC): all three
// gradients of matmul_forward in one kernel, each accumulated (+=) as llm.c does:
//   dinp[bt, i]   += Σ_o dout[bt, o]·weight[o, i]       (dinp = dout·weight)
//   dweight[o, i] += Σ_bt dout[bt, o]·inp[bt, i]        (dweight = doutᵀ·inp)
//   dbias[o]      += Σ_bt dout[bt, o]
// Conventions: storage read_write, sizes in `Params` bound last.
// One flat dispatch of B·T·C + OC·C threads: the first B·T·C each own one dinp element, the
// next OC·C one dweight element, and of those the ones at i = 0 also own dbias[o]. Every thread
// sums into a register starting from the stored value, so no element has two writers (llm.c's
// CUDA version uses cuBLAS and a bias-reduction kernel; this is its naive equivalent).

struct Params {
  B: u32,
  T: u32,
  C: u32,
  OC: u32,
}

@group(0) @binding(0) var<storage, read_write> dinp: array<f32>;
@group(0) @binding(1) var<storage, read_write> dweight: array<f32>;
@group(0) @binding(2) var<storage, read_write> dbias: array<f32>;
@group(0) @binding(3) var<storage, read_write> dout: array<f32>;
@group(0) @binding(4) var<storage, read_write> inp: array<f32>;
@group(0) @binding(5) var<storage, read_write> weight: array<f32>;
@group(0) @binding(6) var<uniform> params: Params;

@compute @workgroup_size(256)
fn matmul_backward_kernel(@builtin(global_invocation_id) gid: vec3<u32>) {
  let BT = params.B * params.T;
  let C = params.C;
  let OC = params.OC;
  let idx = gid.x;

  if (idx < BT * C) {
    let bt = idx / C;
    let i = idx % C;
    var d = dinp[idx];
    for (var o = 0u; o < OC; o++) {
      d += dout[bt * OC + o] * weight[o * C + i];
    }
    dinp[idx] = d;
    return;
  }

  let w = idx - BT * C;
  if (w >= OC * C) { return; }
  let o = w / C;
  let i = w % C;
  var dw = dweight[w];
  for (var bt = 0u; bt < BT; bt++) {
    dw += dout[bt * OC + o] * inp[bt * C + i];
  }
  dweight[w] = dw;
  if (i == 0u) {
    var db = dbias[o];
    for (var bt = 0u; bt < BT; bt++) {
      db += dout[bt * OC + o];
    }
    dbias[o] = db;
  }
}
