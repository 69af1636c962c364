// The verdict on one tensor of a result against the fixture's, by the fixture's tolerance: the
// same metrics and rules as `reftrain compare` (core/golden/compare.cpp, docs/golden-format.md),
// so that the harness can print a verdict per case without reftrain on the machine. CI checks
// that the two agree. With r the fixture's value and x the result's:
//   max_abs = max |x − r|;  nmse = Σ(x − r)² / Σr² (0/0 = 0);  ulp = distance of the bit patterns
//   allclose: |x − r| ≤ atol + rtol·|r|;  NaN equals NaN, an infinity itself, else ∞ error.
// A tolerance is {rtol?, atol?, max_nmse?, max_ulp?}: every criterion present must hold; a
// tensor the manifest gives none is judged exactly.
import { halfToFloat } from './replay/numbers.mjs';

const exact = { rtol: 0, atol: 0 };

// Element i as a number, and its bit pattern as an ordered integer (−0 and +0 both 0).
function reader(t, int8) {
  const d = t.data;
  if (t.dtype === 'F16') return { value: (i) => halfToFloat(d[i]), bits: (i) => ordered(d[i], 0x8000) };
  if (t.dtype === 'BF16') return { value: (i) => bf16ToFloat(d[i]), bits: (i) => ordered(d[i], 0x8000) };
  if (t.dtype === 'F32') {
    const u = new Uint32Array(d.buffer, d.byteOffset, d.length);
    return { value: (i) => d[i], bits: (i) => ordered(u[i], 0x80000000) };
  }
  if (int8) return { value: (i) => (d[i] << 24) >> 24, bits: null };
  return { value: (i) => Number(d[i]), bits: null };
}
const ordered = (bits, sign) => (bits >= sign ? -(bits - sign) : bits);
const bf16Word = new Uint32Array(1), bf16Float = new Float32Array(bf16Word.buffer);
const bf16ToFloat = (h) => { bf16Word[0] = h << 16; return bf16Float[0]; };

// bf16 kernels' outputs: PyTorch assert_close's bf16 default (compare.h bf16_tolerance).
export const bf16Tolerance = { rtol: 1.6e-2, atol: 1e-5 };
// The tolerance of a tensor that states none (compare.h default_tolerance): bf16's for a BF16
// tensor and for every tensor of a bf16 kernel's call in a dump ("NNNN.<layer>.<kernel>_bf16.<binding>"),
// else `fallback`.
export function defaultTolerance(name, dtype, fallback) {
  const call = name.slice(0, Math.max(0, name.lastIndexOf('.')));
  return dtype === 'BF16' || (call.length > 5 && call.endsWith('_bf16')) ? bf16Tolerance : fallback;
}

const absDiff = (r, x) => {
  if (Number.isNaN(r) || Number.isNaN(x)) return Number.isNaN(r) && Number.isNaN(x) ? 0 : Infinity;
  return r === x ? 0 : Math.abs(x - r);
};
const fraction = (v, limit) => (v === 0 ? 0 : limit > 0 ? v / limit : Infinity);

// `reftrain compare`'s --rtol and --atol defaults, for a file that states no tolerances.
export const compareDefault = { rtol: 1e-5, atol: 1e-8 };

// {max_abs, nmse, ulp, used, worst, pass}: `used` the largest fraction of a criterion used.
// Without `tol`, as `reftrain compare` judges a file that states none (defaultTolerance).
export function judgeTensor(name, ref, got, tol = defaultTolerance(name, ref.dtype, compareDefault)) {
  if (ref.shape.join() !== got.shape.join()) throw new Error(`tensor '${name}' has shape [${ref.shape}] in the fixture, [${got.shape}] in the result`);
  const binding = name.slice(name.lastIndexOf('.') + 1);
  const int8 = ref.dtype === 'U8' && (binding === 'm_packed' || binding === 'm_packed_in');
  const R = reader(ref, int8), X = reader(got, int8);
  const ulpDefined = ref.dtype === got.dtype;
  const allclose = tol.rtol !== undefined || tol.atol !== undefined;
  const [rtol, atol] = [tol.rtol ?? 0, tol.atol ?? 0];
  let maxAbs = 0, sqDiff = 0, sqRef = 0, ulpMax = ulpDefined ? 0 : -1, worstUsed = -1, worst = 0;
  for (let i = 0; i < ref.data.length; i++) {
    const r = R.value(i), x = X.value(i), e = absDiff(r, x);
    maxAbs = Math.max(maxAbs, e);
    sqDiff += e * e;
    if (Number.isFinite(r)) sqRef += r * r;
    let ulp = 0;
    if (ulpDefined && e !== 0) {
      ulp = R.bits ? Math.abs(X.bits(i) - R.bits(i)) : e;
      if (Number.isNaN(r) !== Number.isNaN(x)) ulp = Infinity;
      ulpMax = Math.max(ulpMax, ulp);
    }
    let used = 0;
    if (allclose) used = fraction(e, atol + rtol * (Number.isFinite(r) ? Math.abs(r) : 0));
    if (tol.max_ulp !== undefined) used = Math.max(used, ulpDefined ? fraction(ulp, tol.max_ulp) : Infinity);
    if (used > worstUsed) [worstUsed, worst] = [used, i];
  }
  const nmse = sqDiff === 0 ? 0 : sqRef > 0 ? sqDiff / sqRef : Infinity;
  let used = Math.max(0, worstUsed);
  if (tol.max_nmse !== undefined) used = Math.max(used, fraction(nmse, tol.max_nmse));
  return { name, max_abs: maxAbs, nmse, ulp: ulpMax, used, worst, pass: used <= 1 };
}

// Every tensor of a case's result against the fixture: the outputs by the manifest's tolerances,
// the inputs read back from the GPU exactly (a kernel that writes into an input fails).
// {pass, nmse (the largest over the outputs), rows: [judgeTensor...]}
export function judgeCase(entry, caseName, fixture, result) {
  const rows = [];
  for (const [name, got] of Object.entries(result)) {
    const ref = fixture.tensors[name];
    if (!ref) throw new Error(`result tensor ${name} is not in the fixture`);
    const binding = name.slice(caseName.length + 1);
    rows.push(judgeTensor(name, ref, got, entry.tolerances?.[binding] ?? exact));
  }
  const outputs = rows.filter((r) => entry.tolerances?.[r.name.slice(caseName.length + 1)]);
  return { pass: rows.every((r) => r.pass), nmse: Math.max(0, ...outputs.map((r) => r.nmse)), rows };
}
