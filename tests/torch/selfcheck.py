"""Standalone self-check of the torch oracle files in this directory.

Usage: /usr/bin/python3 tests/torch/selfcheck.py
Builds a random tiny GPT-2 IN file (L=2, C=16, NH=2, V=60, Vp=64, maxT=8, B=2, T=5, S=3), runs
gpt2_mirror.py through its CLI, and checks: gradients against float64 central finite differences;
the hand-written optimizer against torch.optim.AdamW (+ manual global-norm clip); the float32 run
against the float64 one; safetensors round-trip and error handling; llm.c checkpoint/token writers.
Exits non-zero on any failure.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt2_mirror as gm  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

CFG = {"arch": "gpt2", "layers": 2, "heads": 2, "channels": 16, "vocab": 60, "padded_vocab": 64, "max_seq": 8}
OPTIM = {"lrs": [1e-2, 5e-3, 2e-3], "beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "wd": 0.1, "clip": 1.0}
B, T, S = 2, 5, 3
failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def make_input(path):
    rng = np.random.default_rng(1234)
    t = {}
    for name, shape in gm.param_shapes(CFG):
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            a = (0.3 if name.endswith(("wte.weight", "wpe.weight")) else 0.1) * rng.standard_normal(shape)
        t[name] = a.astype(np.float32)
    t["inputs"] = rng.integers(0, CFG["vocab"], size=(S, B, T)).astype(np.int32)
    t["targets"] = rng.integers(0, CFG["vocab"], size=(S, B, T)).astype(np.int32)
    decay = [n for n, s in gm.param_shapes(CFG) if len(s) == 2]
    write_safetensors(path, t, {"config": json.dumps(CFG), "optim": json.dumps(OPTIM), "decay": json.dumps(decay)})
    return t, decay


def mirror(inp, out, dtype):
    subprocess.run([sys.executable, os.path.join(HERE, "gpt2_mirror.py"), inp, out, "--dtype", dtype], check=True)
    return read_safetensors(out)[0]


def check_fd(inp, res):
    params, cfg, _, _, inputs, targets = gm.load(inp, torch.float64)
    rng = np.random.default_rng(7)
    worst, n, h = 0.0, 0, 1e-3
    with torch.no_grad():
        for name, w in params.items():
            g = res["grad." + name]
            picks = {int(np.argmax(np.abs(g))), int(rng.integers(g.size))}
            for i in picks:
                flat, f = w.view(-1), {}
                old = flat[i].item()
                for k in (-2, -1, 1, 2):
                    flat[i] = old + k * h
                    f[k] = gm.forward_loss(params, cfg, inputs[0], targets[0]).item()
                flat[i] = old
                fd = (8 * (f[1] - f[-1]) - (f[2] - f[-2])) / (12 * h)  # 4th-order central difference
                an = g.reshape(-1)[i]
                worst = max(worst, abs(fd - an) / max(abs(an), 1e-4))
                n += 1
    check(worst < 1e-7, f"finite differences (float64): {n} entries, worst rel err {worst:.2e} (< 1e-7)")
    wte = res["grad.transformer.wte.weight"]
    check(np.all(wte[CFG["vocab"]:] == 0), "padded wte rows have zero gradient")
    check(np.all(res["grad.transformer.wpe.weight"][T:] == 0), "wpe rows >= T have zero gradient")


def check_optimizer(inp, res):
    """Re-run the S steps with torch.optim.AdamW on manually clipped grads."""
    params, cfg, optim, decay, inputs, targets = gm.load(inp, torch.float64)
    groups = [{"params": [w for n, w in params.items() if n in decay], "weight_decay": optim["wd"]},
              {"params": [w for n, w in params.items() if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(optim["beta1"], optim["beta2"]), eps=optim["eps"])
    losses, norms = [], []
    for s in range(S):
        opt.zero_grad()
        loss = gm.forward_loss(params, cfg, inputs[s], targets[s])
        loss.backward()
        norm = math.sqrt(sum(float((w.grad ** 2).sum()) for w in params.values()))
        clip = min(1.0, optim["clip"] / max(norm, 1e-6))
        for w in params.values():
            w.grad.mul_(clip)
        for g in opt.param_groups:
            g["lr"] = optim["lrs"][s]
        opt.step()
        losses.append(loss.item())
        norms.append(norm)
    dl = np.max(np.abs(np.array(losses) - res["losses"]) / np.abs(res["losses"]))
    dn = np.max(np.abs(np.array(norms) - res["grad_norms"]) / res["grad_norms"])
    check(dl < 1e-12 and dn < 1e-12, f"optimizer vs torch.optim.AdamW: losses rel {dl:.1e}, norms rel {dn:.1e}")
    check(res["losses"][-1] < res["losses"][0], f"loss decreases {res['losses'][0]:.6f} -> {res['losses'][-1]:.6f}")
    want = np.minimum(1.0, OPTIM["clip"] / res["grad_norms"])
    check(np.allclose(res["clips"], want, rtol=1e-15, atol=0), f"clips {res['clips']} = min(1, clip/norm)")


def check_safetensors(d):
    rng = np.random.default_rng(0)
    t = {"b": rng.standard_normal((2, 3)), "a": rng.standard_normal(5).astype(np.float32),
         "c": rng.integers(-9, 9, (4,)).astype(np.int32), "d": np.arange(3, dtype=np.uint16),
         "e": np.ones((0, 2), np.float16), "f": np.arange(7, dtype=np.int64), "g": np.arange(3, dtype=np.uint8)}
    p = os.path.join(d, "rt.safetensors")
    write_safetensors(p, t, {"k": "v"})
    back, meta = read_safetensors(p)
    same = all(back[k].dtype == v.dtype and back[k].shape == v.shape and np.array_equal(back[k], v) for k, v in t.items())
    raw = open(p, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + n])
    order = [k for k in hdr if k != "__metadata__"]
    check(same and meta == {"k": "v"} and (8 + n) % 8 == 0 and order == sorted(t) and set(back) == set(t),
          "safetensors round-trip (7 dtypes, metadata, 8-byte alignment, sorted order)")
    bad = {"truncated": raw[:-4], "header too long": struct.pack("<Q", 10 ** 6) + raw[8:]}
    h2 = dict(hdr)
    h2["a"] = dict(h2["a"], data_offsets=[0, 12])
    hb = json.dumps(h2).encode()
    bad["size mismatch"] = struct.pack("<Q", len(hb)) + hb + raw[8 + n:]
    for what, blob in bad.items():
        q = os.path.join(d, "bad.safetensors")
        open(q, "wb").write(blob)
        try:
            read_safetensors(q)
            check(False, f"safetensors rejects {what}")
        except ValueError as e:
            check(True, f"safetensors rejects {what}: {e}")


def check_llmc(inp, t, d):
    out = os.path.join(d, "model.bin")
    tool = os.path.join(HERE, "llmc_files.py")
    subprocess.run([sys.executable, tool, "checkpoint", inp, out], check=True)
    L, C, Vp, maxT = CFG["layers"], CFG["channels"], CFG["padded_vocab"], CFG["max_seq"]
    hdr = np.fromfile(out, dtype="<i4", count=256)
    body = np.fromfile(out, dtype="<f4", offset=1024)
    want = [20240326, 3, maxT, CFG["vocab"], L, CFG["heads"], C, Vp]
    nparams = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    off = Vp * C + maxT * C + 2 * L * C                        # start of qkvw
    qkvw1 = body[off + 3 * C * C: off + 6 * C * C].reshape(3 * C, C)
    ok = (list(hdr[:8]) == want and not hdr[8:].any() and body.size == nparams
          and np.array_equal(body[:Vp * C].reshape(Vp, C), t["transformer.wte.weight"])
          and np.array_equal(qkvw1, t["transformer.h.1.attn.c_attn.weight"])
          and np.array_equal(body[-C:], t["transformer.ln_f.bias"])
          and np.array_equal(body[Vp * C + maxT * C + L * C:][:C], t["transformer.h.0.ln_1.bias"]))
    check(ok, f"llm.c checkpoint: header {list(hdr[:8])}, {body.size} floats, wte/qkvw[1]/ln1b[0]/lnfb match")
    tok = os.path.join(d, "tok.bin")
    subprocess.run([sys.executable, tool, "tokens", tok, "--count", "100", "--vocab", "60", "--seed", "5"], check=True)
    th = np.fromfile(tok, dtype="<i4", count=256)
    tv = np.fromfile(tok, dtype="<u2", offset=1024)
    ok = (list(th[:3]) == [20240520, 1, 100] and not th[3:].any()
          and np.array_equal(tv, np.random.default_rng(5).integers(0, 60, size=100)))
    check(ok, f"llm.c tokens: header {list(th[:3])}, {tv.size} tokens in [{tv.min()}, {tv.max()}]")


def main():
    with tempfile.TemporaryDirectory() as d:
        inp = os.path.join(d, "in.safetensors")
        t, _ = make_input(inp)
        res = mirror(inp, os.path.join(d, "out64.safetensors"), "float64")
        r32 = mirror(inp, os.path.join(d, "out32.safetensors"), "float32")
        check(res["loss"][0] == res["losses"][0] and len(res["losses"]) == S
              and all(f"grad.{n}" in res for n, _ in gm.param_shapes(CFG)), "OUT has loss, losses, all grads")
        d32 = np.max(np.abs(r32["losses"] - res["losses"]))
        check(d32 < 1e-5, f"float32 vs float64 losses: max abs diff {d32:.1e}")
        check_fd(inp, res)
        check_optimizer(inp, res)
        check_safetensors(d)
        check_llmc(inp, t, d)
    print("SELFCHECK " + ("PASSED" if not failures else f"FAILED ({len(failures)})"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
