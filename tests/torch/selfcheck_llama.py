"""Standalone self-check of llama_mirror.py and rope_check.py.

Usage: /usr/bin/python3 tests/torch/selfcheck_llama.py
Builds a random tiny llama IN file (L=2, C=16, NH=2 so hs=8, F=24, V=60, Vp=64, maxT=8, B=2,
T=5, S=3, theta=10000, z_loss=0.1), runs llama_mirror.py through its CLI and checks: the RoPE
against the per-element pair formula and its relative-position property; the loss (cross-entropy
over the first V columns + z-loss) against numpy on the model's logits; gradients against
float64 central finite differences (every tensor, through RoPE, z-loss and the padded vocab);
the hand-written optimizer against torch.optim.AdamW; float32 vs float64; --mixed (small loss
change, straight-through gradients, exactly which tensors are rounded); config errors; and
rope_check.py's y and gradient against the rotation and its transpose.  Exits non-zero on failure.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_mirror as lm  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402
from selfcheck import check, check_mixed, check_optimizer, failures, mirror  # noqa: E402

CFG = {"arch": "llama", "layers": 2, "heads": 2, "channels": 16, "ffn": 24, "vocab": 60, "padded_vocab": 64,
       "max_seq": 8, "rope_theta": 10000.0, "z_loss": 0.1}
OPTIM = {"lrs": [1e-2, 5e-3, 2e-3], "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "wd": 0.1, "clip": 1.0}
B, T, S = 2, 5, 3


def make_input(path, cfg=CFG):
    rng = np.random.default_rng(4321)
    t = {}
    for name, shape in lm.param_shapes(cfg):
        if len(shape) == 1:  # norm weights
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            a = (0.5 if "embed" in name else 0.2) * rng.standard_normal(shape)
        t[name] = a.astype(np.float32)
    t["inputs"] = rng.integers(0, cfg["vocab"], size=(S, B, T)).astype(np.int32)
    t["targets"] = rng.integers(0, cfg["vocab"], size=(S, B, T)).astype(np.int32)
    decay = [n for n, s in lm.param_shapes(cfg) if len(s) == 2]
    write_safetensors(path, t, {"config": json.dumps(cfg), "optim": json.dumps(OPTIM), "decay": json.dumps(decay)})
    return t


def rope_pairs(x, theta, sign=1.0):
    """Per-element numpy RoPE on x [..., T, hs]: out[i] = x[i]c - x[i+h]s, out[i+h] = x[i+h]c + x[i]s,
    angle = sign * t * theta^(-2i/hs).  sign=-1 is the inverse (= transposed) rotation."""
    *_, T_, hs = x.shape
    h, out = hs // 2, np.empty_like(x)
    for t in range(T_):
        for i in range(h):
            a = sign * t * theta ** (-2.0 * i / hs)
            c, s = math.cos(a), math.sin(a)
            out[..., t, i] = x[..., t, i] * c - x[..., t, i + h] * s
            out[..., t, i + h] = x[..., t, i + h] * c + x[..., t, i] * s
    return out


def check_rope():
    rng = np.random.default_rng(3)
    hs, theta = 8, 100.0
    x = rng.standard_normal((2, 3, 7, hs))
    cos, sin = lm.rope_cos_sin(7, hs, theta, torch.float64)
    y = lm.apply_rope(torch.tensor(x), cos, sin).numpy()
    err = np.max(np.abs(y - rope_pairs(x, theta)))
    check(err < 1e-14, f"rope (HF rotate_half) = per-element pair formula: max abs err {err:.1e}")
    # relative position: <rope(q at t), rope(k at s)> depends on t - s only
    q, k = rng.standard_normal(hs), rng.standard_normal(hs)
    qs = lm.apply_rope(torch.tensor(np.tile(q, (7, 1))), cos, sin).numpy()
    ks = lm.apply_rope(torch.tensor(np.tile(k, (7, 1))), cos, sin).numpy()
    d = max(abs(qs[t] @ ks[s] - qs[t - s] @ ks[0]) for t in range(7) for s in range(t + 1))
    check(d < 1e-13, f"rope scores depend on t - s only: max dev {d:.1e}")


def check_loss(inp, res):
    """The CLI's loss against numpy CE + z-loss on the torch logits (first V of Vp columns)."""
    params, cfg, _, _, inputs, targets = lm.load(inp, torch.float64)
    with torch.no_grad():
        logits = lm.forward_logits(params, cfg, inputs[0]).numpy().reshape(B * T, -1)
    check(logits.shape[1] == CFG["padded_vocab"], f"logits have all Vp = {logits.shape[1]} columns")
    lv = logits[:, :CFG["vocab"]]
    mx = lv.max(axis=1, keepdims=True)
    lse = (mx + np.log(np.exp(lv - mx).sum(axis=1, keepdims=True)))[:, 0]
    tg = targets[0].numpy().reshape(-1)
    ce = np.mean(lse - lv[np.arange(B * T), tg])
    want = ce + CFG["z_loss"] * np.mean(lse ** 2)
    err = abs(want - res["loss"][0]) / want
    check(err < 1e-14, f"loss = CE {ce:.6f} + z {CFG['z_loss']} * mean(lse^2) {np.mean(lse ** 2):.4f} "
                       f"= {want:.12f} (numpy), rel err {err:.1e}")


def check_fd(inp, res):
    params, cfg, _, _, inputs, targets = lm.load(inp, torch.float64)
    rng = np.random.default_rng(8)
    worst, where, n, h = 0.0, "", 0, 1e-3
    with torch.no_grad():
        for name, w in params.items():
            g = res["grad." + name]
            picks = {int(np.argmax(np.abs(g))), int(rng.integers(g.size))}
            for i in picks:
                flat, f = w.view(-1), {}
                old = flat[i].item()
                for k in (-2, -1, 1, 2):
                    flat[i] = old + k * h
                    f[k] = lm.forward_loss(params, cfg, inputs[0], targets[0]).item()
                flat[i] = old
                fd = (8 * (f[1] - f[-1]) - (f[2] - f[-2])) / (12 * h)  # 4th-order central difference
                an = g.reshape(-1)[i]
                e = abs(fd - an) / max(abs(an), 1e-4)
                if e > worst:
                    worst, where = e, f"{name}[{i}]"
                n += 1
    check(worst < 1e-7, f"finite differences (float64, z-loss {CFG['z_loss']}, RoPE, V {CFG['vocab']} < Vp "
                        f"{CFG['padded_vocab']}): {n} entries, worst rel err {worst:.2e} at {where} (< 1e-7)")
    V, used = CFG["vocab"], set(inputs[0].flatten().tolist())
    emb, head = res["grad.model.embed_tokens.weight"], res["grad.lm_head.weight"]
    unused = [r for r in range(CFG["padded_vocab"]) if r not in used]
    check(np.all(emb[unused] == 0) and np.all(np.abs(emb[sorted(used)]).sum(axis=1) > 0),
          f"embed grad: nonzero on the {len(used)} input rows, zero on the other {len(unused)} (incl. padded)")
    check(np.all(head[V:] == 0) and np.all(np.abs(head[:V]).sum(axis=1) > 0),
          "lm_head grad: zero on padded rows >= V, nonzero below")


def check_bad_config(d):
    bad = []
    for what, cfg in (("no rope_theta", {k: v for k, v in CFG.items() if k != "rope_theta"}),
                      ("odd head size", dict(CFG, heads=16)), ("gpt2 arch", dict(CFG, arch="gpt2"))):
        p = os.path.join(d, "bad.safetensors")
        make_input(p)
        t, meta = read_safetensors(p)
        meta["config"] = json.dumps(cfg)
        write_safetensors(p, t, meta)
        r = subprocess.run([sys.executable, os.path.join(HERE, "llama_mirror.py"), p, p + ".out"],
                           capture_output=True, text=True)
        if r.returncode == 0 or "ValueError" not in r.stderr:
            bad.append(what)
    check(not bad, "llama_mirror rejects bad configs (missing rope_theta, odd head size, wrong arch)"
                   + (f"; accepted: {bad}" if bad else ""))


def check_rope_cli(d):
    rng = np.random.default_rng(11)
    NH, hs, theta, Bq, Tq = 3, 8, 10000.0, 2, 6
    x = rng.standard_normal((Bq, Tq, NH * hs)).astype(np.float32)
    r = rng.standard_normal((Bq, Tq, NH * hs)).astype(np.float32)
    inp, out = os.path.join(d, "rope_in.safetensors"), os.path.join(d, "rope_out.safetensors")
    write_safetensors(inp, {"x": x, "r": r}, {"heads": str(NH), "theta": str(theta)})
    subprocess.run([sys.executable, os.path.join(HERE, "rope_check.py"), inp, out], check=True)
    o = read_safetensors(out)[0]
    heads = lambda a: a.astype(np.float64).reshape(Bq, Tq, NH, hs).transpose(0, 2, 1, 3)  # noqa: E731
    back = lambda a: a.transpose(0, 2, 1, 3).reshape(Bq, Tq, NH * hs)  # noqa: E731
    ey = np.max(np.abs(o["y"] - back(rope_pairs(heads(x), theta))))
    eg = np.max(np.abs(o["grad"] - back(rope_pairs(heads(r), theta, sign=-1.0))))
    check(o["y"].dtype == np.float64 and o["grad"].dtype == np.float64 and o["y"].shape == x.shape
          and ey < 1e-14 and eg < 1e-14,
          f"rope_check.py: y = rotation of x (err {ey:.1e}), grad = transposed rotation of r (err {eg:.1e}), F64")
    # norms are preserved and the gradient is the exact transpose: <rope(x), r> = <x, grad>
    dots = abs(np.sum(o["y"] * r.astype(np.float64)) - np.sum(x.astype(np.float64) * o["grad"]))
    nrm = np.max(np.abs(np.linalg.norm(heads(o["y"]), axis=-1) - np.linalg.norm(heads(x), axis=-1)))
    check(dots < 1e-12 and nrm < 1e-13, f"rope_check.py: <y, r> = <x, grad> (diff {dots:.1e}), "
                                        f"per-head norms kept (diff {nrm:.1e})")


def main():
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "in.safetensors")
        make_input(inp)
        run = lambda name, dt, *ex: mirror(inp, os.path.join(d, name), dt, *ex, script="llama_mirror.py")  # noqa: E731
        res = run("out64.safetensors", "float64")
        r32 = run("out32.safetensors", "float32")
        rm = run("outm.safetensors", "float64", "--precision", "mixed")
        check(res["loss"][0] == res["losses"][0] and len(res["losses"]) == S
              and all(f"grad.{n}" in res for n, _ in lm.param_shapes(CFG)), "OUT has loss, losses, all grads")
        d32 = np.max(np.abs(r32["losses"] - res["losses"]))
        check(d32 < 1e-5, f"float32 vs float64 losses: max abs diff {d32:.1e}")
        check_rope()
        check_loss(inp, res)
        check_fd(inp, res)
        check_optimizer(inp, res, lm)
        params, cfg, _, _, inputs, targets = lm.load(inp, torch.float64)
        rounded = {n for n, s in lm.param_shapes(CFG) if len(s) == 2 and "embed" not in n}
        check_mixed("llama", res, rm, params, lambda p, m: lm.forward_loss(p, cfg, inputs[0], targets[0], "mixed" if m else "fp32"),
                    rounded, {}, "model.embed_tokens.weight", ste_exact=True)
        check(np.all(rm["grad.lm_head.weight"][CFG["vocab"]:] == 0), "llama --mixed padded lm_head rows: zero grad")
        check_bad_config(d)
        check_rope_cli(d)
    print("SELFCHECK_LLAMA " + ("PASSED" if not failures else f"FAILED ({len(failures)})"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
