"""Independent oracle for the AdamW steps of bf16-only weights (optim/adamw.h):
adamw_update_bf16_sr (bf16-pure, stochastic rounding) and adamw_update_bf16_kahan (bf16-kahan,
rounding to nearest with a compensation).

Usage: /usr/bin/python3 tests/torch/bf16_update_oracle.py DIR

DIR holds raw little-endian arrays written by tests/optim/test_adamw_bf16_oracle.cpp and meta.json
({"mode": "stochastic" or "kahan", "n", "t", "lr", "beta1", "beta2", "eps", "wd", "clip", and for
"stochastic" "seed" and "first"}):
  w.f32, g.f32, m.f32, v.f32 [n]    the state before the step (kahan: and comp.u16, bf16 bits)
  w_out.f32, m_out.f32, v_out.f32   reftrain's state after it (reference and fast, which the
  wb16_out.u16 [n]                  C++ test holds equal), and the bf16 weights it wrote
  comp_out.u16 [n]                  kahan: the compensation it wrote

The step is recomputed here in numpy float32, one correctly rounded operation at a time in the
documented order, and the roundings to bf16 in Python integers from the documented formulas:
  delta = lr * (m_hat / (sqrt(v_hat) + eps) + wd * w);  w_new = w - delta
  stochastic:
    mix(x): x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16 (mod 2^32)
    noise = mix((first + i) ^ mix(t ^ mix(seed))) >> 16
    wb16  = (bits(w_new) + noise) >> 16
  kahan:
    s = f32(comp) - delta;  wb16 = rne(w + s);  comp = rne(s - (f32(wb16) - w))
  where every bf16 result with exponent field 0 is made +-0 and any NaN 0x7FC0.
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


def finish(u, r):
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return 0x7FC0
    return r & 0x8000 if (r & 0x7F80) == 0 else r


def stochastic_bits(u, noise):
    return finish(u, ((u + noise) & M32) >> 16)


def nearest_bits(u):
    return finish(u, ((u + 0x7FFF + ((u >> 16) & 1)) & M32) >> 16)


def widen(bits):
    return (bits.astype("<u4") << 16).view("<f4")


def main(d):
    meta = json.load(open(os.path.join(d, "meta.json")))
    n, mode = meta["n"], meta["mode"]
    read = lambda name, dt: np.fromfile(os.path.join(d, name), dtype=dt, count=n)
    w, g, m, v = (read(x + ".f32", "<f4") for x in "wgmv")
    f = np.float32
    t = meta["t"]
    clip, lr, b1, b2, eps, wd = (f(meta[k]) for k in ("clip", "lr", "beta1", "beta2", "eps", "wd"))
    b1_corr = f(1) / max(f(1) - f(float(np.float64(meta["beta1"]) ** t)), f(1e-12))
    b2_corr = f(1) / max(f(1) - f(float(np.float64(meta["beta2"]) ** t)), f(1e-12))
    want = {}
    with np.errstate(invalid="ignore", over="ignore"):
        grad = np.where(np.isfinite(g), g * clip, f(0)).astype(f)
        want["m_out.f32"] = m_new = (b1 * m + (f(1) - b1) * grad).astype(f)
        want["v_out.f32"] = v_new = (b2 * v + ((f(1) - b2) * grad) * grad).astype(f)
        m_hat = (m_new * b1_corr).astype(f)
        v_hat = (v_new * b2_corr).astype(f)
        delta = (lr * (m_hat / (np.sqrt(v_hat) + eps) + wd * w)).astype(f)
        if mode == "stochastic":
            u = (w - delta).astype(f).view("<u4")
            key = mix(t ^ mix(meta["seed"]))
            wb16 = np.array([stochastic_bits(int(u[i]), mix((meta["first"] + i) ^ key) >> 16)
                             for i in range(n)], dtype="<u2")
            moved = int(np.sum(wb16 != (u >> 16).astype("<u2")))
        else:
            s = (widen(read("comp.u16", "<u2")) - delta).astype(f)
            u = (w + s).astype(f).view("<u4")
            wb16 = np.array([nearest_bits(int(x)) for x in u], dtype="<u2")
            lost = (s - (widen(wb16) - w)).astype(f).view("<u4")
            want["comp_out.u16"] = np.array([nearest_bits(int(x)) for x in lost], dtype="<u2")
            moved = int(np.sum(want["comp_out.u16"] != 0))
    want["wb16_out.u16"] = wb16
    want["w_out.f32"] = widen(wb16)
    failures = 0
    for name, x in want.items():
        dt = "<u4" if name.endswith("f32") else "<u2"
        got = read(name, "<f4" if name.endswith("f32") else "<u2").view(dt)
        bad = np.nonzero(got != x.view(dt))[0]
        if len(bad):
            failures += 1
            i = bad[0]
            print(f"{name}: {len(bad)} of {n} differ, first at {i}: got {got[i]:#x}, "
                  f"want {x.view(dt)[i]:#x}")
    # stochastic: the weights rounded up, about half; kahan: the nonzero compensations, most.
    if not (0.2 * n < moved < (0.8 * n if mode == "stochastic" else n + 1)):
        failures += 1
        print(f"only {moved} of {n} weights moved by the rounding: it is not doing its work")
    if failures:
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1])
