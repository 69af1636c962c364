// Host-side number helpers of the replay and the judge: the f16 and bf16 roundings the mirrors
// must equal, the f16 widening, and the shortest decimal of an f32 (how reftrain writes the trace's numbers).
const f = new Float32Array(1);
const bits = new Uint32Array(f.buffer);

// f16(clamp(x, ±65504)) as bits, rounded to nearest even, subnormals kept (cast_f32_to_f16).
export function f16Bits(x) {
  f[0] = Number.isNaN(x) ? x : Math.min(65504, Math.max(-65504, x));
  const b = bits[0];
  const sign = (b >>> 16) & 0x8000;
  const e = ((b >>> 23) & 0xff) - 127 + 15;
  let m = b & 0x7fffff;
  if (((b >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (m ? 0x200 : 0);
  if (e <= 0) {  // a subnormal f16 (or 0): the significand with its leading 1, shifted
    if (e < -10) return sign;
    m |= 0x800000;
    const shift = 14 - e;
    const h = m >>> shift, rem = m & ((1 << shift) - 1), half = 1 << (shift - 1);
    return sign | (h + (rem > half || (rem === half && (h & 1)) ? 1 : 0));
  }
  const h = (e << 10) | (m >>> 13), rem = m & 0x1fff;
  return sign | (h + (rem > 0x1000 || (rem === 0x1000 && (h & 1)) ? 1 : 0));
}

// bf16(x) as bits (cast_f32_to_bf16, ops/bf16.h): round to nearest, ties to even, on the top 16
// bits of the f32; a result that is a bf16 subnormal becomes ±0; any NaN becomes 0x7FC0.
export function bf16Bits(x) {
  f[0] = x;
  const b = bits[0];
  if ((b & 0x7fffffff) > 0x7f800000) return 0x7fc0;
  const r = ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;  // a carry out of +Inf cannot happen: NaNs left
  return (r & 0x7f80) === 0 ? r & 0x8000 : r;
}

// The shortest decimal that reads back to the same f32.
export function shortest(x) {
  const v = Math.fround(x);
  if (!Number.isFinite(v)) return JSON.stringify(String(v));
  for (let p = 1; p < 17; p++) {
    const s = v.toPrecision(p);
    if (Math.fround(Number(s)) === v) return String(Number(s));
  }
  return String(v);
}

// The value of f16 bits (exact: every f16 is an f32).
export function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1, e = (h >>> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0x1f) return m ? NaN : sign * Infinity;
  return sign * (e === 0 ? m * 2 ** -24 : (1 + m / 1024) * 2 ** (e - 15));
}
