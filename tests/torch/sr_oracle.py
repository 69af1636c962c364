"""Independent oracle for bf16-pure's AdamW step (optim/adamw.h's adamw_update_bf16_sr).

Usage: /usr/bin/python3 tests/torch/sr_oracle.py DIR

DIR holds raw little-endian arrays written by tests/optim/test_adamw_sr_oracle.cpp and meta.json
({"n", "t", "seed", "first", "lr", "beta1", "beta2", "eps", "wd", "clip"}):
  w.f32, g.f32, m.f32, v.f32 [n]    the state before the step
  w_out.f32, m_out.f32, v_out.f32   reftrain's state after it (reference and fast, which the
  wb16_out.u16 [n]                  C++ test holds equal), and the bf16 weights it wrote

The step is recomputed here in numpy float32, one correctly rounded operation at a time in the
documented order, and the noise and the rounding in Python integers from the documented formulas:
  mix(x): x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16 (mod 2^32)
  noise = mix((first + i) ^ mix(t ^ mix(seed))) >> 16
  wb16  = (bits(w_new) + noise) >> 16, a result with exponent field 0 made +-0, NaN 0x7FC0
Every output must match bit for bit. Prints one line per failure and "ok" (exit 1 on failure).
"""
import json
import os
import sys

import numpy as np

M32 = 0xFFFFFFFF


def mix(x):
    x &= M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    x ^= x >> 16
    return x


def stochastic_bits(u, noise):
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    r = ((u + noise) & M32) >> 16
    return r & 0x8000 if (r & 0x7F80) == 0 else r


def main(d):
    meta = json.load(open(os.path.join(d, "meta.json")))
    n = meta["n"]
    read = lambda name, dt: np.fromfile(os.path.join(d, name), dtype=dt, count=n)
    w, g, m, v = (read(x + ".f32", "<f4") for x in "wgmv")
    f = np.float32
    t = meta["t"]
    clip, lr, b1, b2, eps, wd = (f(meta[k]) for k in ("clip", "lr", "beta1", "beta2", "eps", "wd"))
    b1_corr = f(1) / max(f(1) - f(float(np.float64(meta["beta1"]) ** t)), f(1e-12))
    b2_corr = f(1) / max(f(1) - f(float(np.float64(meta["beta2"]) ** t)), f(1e-12))
    with np.errstate(invalid="ignore", over="ignore"):
        grad = np.where(np.isfinite(g), g * clip, f(0)).astype(f)
        m_new = (b1 * m + (f(1) - b1) * grad).astype(f)
        v_new = (b2 * v + ((f(1) - b2) * grad) * grad).astype(f)
        m_hat = (m_new * b1_corr).astype(f)
        v_hat = (v_new * b2_corr).astype(f)
        w_new = (w - lr * (m_hat / (np.sqrt(v_hat) + eps) + wd * w)).astype(f)
    key = mix(t ^ mix(meta["seed"]))
    u = w_new.view("<u4")
    wb16 = np.array([stochastic_bits(int(u[i]), mix((meta["first"] + i) ^ key) >> 16)
                     for i in range(n)], dtype="<u2")
    failures = 0
    for name, want, dt in (("m_out.f32", m_new, "<u4"), ("v_out.f32", v_new, "<u4"),
                           ("wb16_out.u16", wb16, "<u2"),
                           ("w_out.f32", (wb16.astype("<u4") << 16).view("<f4"), "<u4")):
        got = read(name, "<f4" if name.endswith("f32") else "<u2").view(dt)
        bad = np.nonzero(got != want.view(dt))[0]
        if len(bad):
            failures += 1
            i = bad[0]
            print(f"{name}: {len(bad)} of {n} differ, first at {i}: got {got[i]:#x}, "
                  f"want {want.view(dt)[i]:#x}")
    ups = int(np.sum(wb16 != (u >> 16).astype("<u2")))
    if not (0.2 * n < ups < 0.8 * n):
        failures += 1
        print(f"only {ups} of {n} weights rounded up: the noise is not doing its work")
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
