"""Independent oracle for reftrain's bf16 kernels (ops/bf16.h, ops/matmul_bf16.h).

Usage: /usr/bin/python3 tests/torch/bf16_oracle.py DIR

DIR holds raw little-endian arrays written by tests/ops/test_bf16_oracle.cpp and meta.json
({"M", "N", "K", "n"}):
  x.f32 [n], xb.u16 [n]          values and reftrain's f32 -> bf16 conversion of them
  a.u16 [M,K], b.u16 [K,N]       bf16 operands (row-major), c0.f32 [M,N] the initial C
  ref.f32, fast.f32 [M,N]        reftrain's reference and fast products, C = c0 + A·B

Checks, printing one line per failure and "ok" at the end (exit 1 on any failure):
  - the conversion against torch's `.to(torch.bfloat16)` (round to nearest even) wherever torch's
    result is a normal number, an infinity or zero; where torch keeps a bf16 subnormal, ours must
    be the zero of the same sign; every NaN must be 0x7FC0;
  - both products against the canonical order evaluated here in exact rational arithmetic
    (fractions.Fraction): per output, blocks of 32 k (zero-padded), an even and an odd FMA chain
    from +0, then c = c + (even + odd); every operation rounded once to 24 significant bits
    (ties to even, unbounded exponent) and flushed to a signed zero when below 2^-126, inputs
    below 2^-126 read as zero, IEEE's rules for the sign of an exact zero;
  - and that the product is a product: within 2^-6 relative of torch's float64 matmul of the same
    bf16 inputs (|c - exact| <= 2^-6 (|c0| + |A|·|B|)).
"""
import json
import math
import os
import sys
from fractions import Fraction

import numpy as np
import torch

TINY = 2.0 ** -126


def daz(x):
    return math.copysign(0.0, x) if abs(x) < TINY else x


def round24(x):
    """x (a nonzero Fraction) rounded to 24 significant bits, ties to even, unbounded exponent."""
    ax = abs(x)
    e = ax.numerator.bit_length() - ax.denominator.bit_length()
    if ax < Fraction(2) ** e:
        e -= 1
    scale = Fraction(2) ** (23 - e)
    r = Fraction(round(ax * scale)) / scale  # round() on a Fraction ties to even
    return r if x > 0 else -r


def fma_flush(a, b, c):
    a, b, c = daz(a), daz(b), daz(c)
    x = Fraction(a) * Fraction(b) + Fraction(c)
    if x == 0:
        product_negative = (math.copysign(1, a) * math.copysign(1, b)) < 0
        both_negative = product_negative and math.copysign(1, c) < 0
        return -0.0 if both_negative else 0.0
    r = round24(x)
    if abs(r) < TINY:
        return -0.0 if x < 0 else 0.0
    return float(r)


def canonical_dot(c, a_row, b_col):
    K = len(a_row)
    c = daz(c)
    for k0 in range(0, K, 32):
        even = odd = 0.0
        for k in range(k0, k0 + 32, 2):
            even = fma_flush(a_row[k] if k < K else 0.0, b_col[k] if k < K else 0.0, even)
            odd = fma_flush(a_row[k + 1] if k + 1 < K else 0.0, b_col[k + 1] if k + 1 < K else 0.0, odd)
        c = fma_flush(c, 1.0, fma_flush(even, 1.0, odd))
    return c


def read(d, name, dtype):
    return np.fromfile(os.path.join(d, name), dtype=dtype)


def bf16_values(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def check_conversion(d, n, fails):
    x = read(d, "x.f32", np.float32)
    ours = read(d, "xb.u16", np.uint16)
    theirs = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    for i in range(n):
        o, t = int(ours[i]), int(theirs[i])
        if math.isnan(x[i]):
            ok = o == 0x7FC0
        elif (t & 0x7F80) == 0 and (t & 0x7F) != 0:  # torch keeps a bf16 subnormal
            ok = o == (t & 0x8000)
        else:
            ok = o == t
        if not ok:
            fails.append(f"convert x={x[i]!r} (0x{x[i:i+1].view(np.uint32)[0]:08X}): ours 0x{o:04X} torch 0x{t:04X}")


def check_products(d, M, N, K, fails):
    a = bf16_values(read(d, "a.u16", np.uint16)).reshape(M, K).astype(np.float64)
    b = bf16_values(read(d, "b.u16", np.uint16)).reshape(K, N).astype(np.float64)
    c0 = read(d, "c0.f32", np.float32).reshape(M, N)
    exact = c0.astype(np.float64) + (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    bound = 2.0 ** -6 * (np.abs(c0) + np.abs(a) @ np.abs(b))
    for name in ("ref.f32", "fast.f32"):
        got = read(d, name, np.float32).reshape(M, N)
        for i in range(M):
            for j in range(N):
                want = canonical_dot(float(c0[i, j]), list(a[i]), list(b[:, j]))
                g = float(got[i, j])
                if g != want or math.copysign(1, g) != math.copysign(1, want):
                    fails.append(f"{name}[{i},{j}] = {g!r}, canonical order gives {want!r}")
                if abs(g - exact[i, j]) > bound[i, j] + TINY:
                    fails.append(f"{name}[{i},{j}] = {g!r} is not the product {exact[i, j]!r}")


def main():
    d = sys.argv[1]
    meta = json.load(open(os.path.join(d, "meta.json")))
    fails = []
    check_conversion(d, meta["n"], fails)
    check_products(d, meta["M"], meta["N"], meta["K"], fails)
    for f in fails[:20]:
        print(f)
    if fails:
        print(f"{len(fails)} failures")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
