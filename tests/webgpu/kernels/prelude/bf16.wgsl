// The bf16 twins' prelude (no shader-f16: bf16 is integer work on f32 bit patterns). A bf16
// tensor is stored two to a u32 word, element 2j in word j's low half and 2j + 1 in its high
// half: a safetensors BF16 tensor's bytes as they are, uploaded and read back unchanged.
// The arithmetic is ops/bf16.h's: subnormal bf16 inputs read as ±0, f32 → bf16 rounds to
// nearest even with a subnormal result flushed to ±0 and any NaN made 0x7FC0, and the canonical
// product (ops/matmul_bf16.h) flushes every FMA and add result below 2^-126 to ±0. WGSL may flush
// subnormals itself, before rounding: that changes nothing outside the subnormal band the
// fixtures' manifest names.

// x with a subnormal (exponent field 0) made ±0.
fn flush(x: f32) -> f32 {
  let u = bitcast<u32>(x);
  return bitcast<f32>(select(u, u & 0x80000000u, (u & 0x7F800000u) == 0u));
}

// Element i of a bf16 tensor whose word i/2 is `word`, as f32 (subnormal bf16 → ±0).
fn bf16_unpack(word: u32, i: u32) -> f32 {
  let bits = select(word & 0xFFFFu, word >> 16u, (i & 1u) == 1u);
  return flush(bitcast<f32>(bits << 16u));
}

// The bf16 bit pattern (in the low 16 bits) nearest the f32 bit pattern u: adding 0x7FFF plus
// the lowest kept bit and dropping 16 bits rounds ties to even; exponent field 0 after rounding
// becomes ±0; a NaN becomes the one quiet NaN. No u below NaN overflows the add.
fn bf16_round_bits(u: u32) -> u32 {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) { return 0x7FC0u; }
  let r = (u + 0x7FFFu + ((u >> 16u) & 1u)) >> 16u;
  return select(r, r & 0x8000u, (r & 0x7F80u) == 0u);
}

// Two bf16 (element 2j, then 2j + 1) in one word.
fn bf16_pack(lo: f32, hi: f32) -> u32 {
  return bf16_round_bits(bitcast<u32>(lo)) | (bf16_round_bits(bitcast<u32>(hi)) << 16u);
}

// One step of a chain and the block's closing add. a·b of two bf16 is exact in f32 (16
// significant bits), so WGSL's fma, fused or not, rounds once.
fn fma_flush(a: f32, b: f32, c: f32) -> f32 { return flush(fma(a, b, c)); }
fn add_flush(a: f32, b: f32) -> f32 { return flush(a + b); }
