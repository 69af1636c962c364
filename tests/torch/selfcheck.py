"""Standalone self-check of the torch oracle files in this directory.

Usage: /usr/bin/python3 tests/torch/selfcheck.py
Builds a random tiny GPT-2 IN file (L=2, C=16, NH=2, V=60, Vp=64, maxT=8, B=2, T=5, S=3), runs
gpt2_mirror.py through its CLI, and checks: gradients against float64 central finite differences;
the hand-written optimizer against torch.optim.AdamW (+ manual global-norm clip); the float32 run
against the float64 one; --mixed (fp16-rounded matmul weights: small loss change, gradients still
reach every master, exactly which tensors are rounded); safetensors round-trip and error handling;
llm.c checkpoint/token writers.  Exits non-zero on any failure.  (selfcheck_llama.py: llama family.)
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


def mirror(inp, out, dtype, *extra, script="gpt2_mirror.py"):
    subprocess.run([sys.executable, os.path.join(HERE, script), inp, out, "--dtype", dtype, *extra], check=True)
    return read_safetensors(out)[0]


def grads_of(params, loss_fn):
    """(loss, {name: grad}) of loss_fn(params) (float64 CPU tensors)."""
    for w in params.values():
        w.grad = None
    loss = loss_fn(params)
    loss.backward()
    return loss.item(), {n: w.grad.clone() for n, w in params.items()}


def check_mixed(tag, res, res_m, params, loss_fn, rounded, picks, embed, ste_exact):
    """--mixed checks.  res/res_m: float64 OUT of the plain/--mixed CLI runs; params: float64 leaves
    (master values); loss_fn(params, mixed) -> step-0 loss; rounded: names whose matmul reads
    are rounded; picks: {name: [(flat index, mixed loss must move), ...]} probes replacing the
    default one (argmax |grad|, moves iff the name is not in `rounded`); embed: the
    embedding name.  ste_exact: also require grads(mixed, master) == grads(plain, rounded
    weights) bit for bit (needs the rounded weights to be read only through round_f16)."""
    l0, lm = res["loss"][0], res_m["loss"][0]
    rel = abs(lm - l0) / abs(l0)
    check(0 < rel < 1e-3, f"{tag} --mixed step-0 loss {lm:.12f} vs {l0:.12f}: rel change {rel:.1e} in (0, 1e-3)")
    dl = np.max(np.abs(res_m["losses"] - res["losses"]) / np.abs(res["losses"]))
    check(0 < dl < 1e-3, f"{tag} --mixed losses over {len(res['losses'])} steps: max rel change {dl:.1e} in (0, 1e-3)")
    names = [n for n in res if n.startswith("grad.")]
    gd = max(np.linalg.norm(res_m[n] - res[n]) / np.linalg.norm(res[n]) for n in names)
    ge = res_m["grad." + embed]
    check(gd < 2e-2 and np.linalg.norm(ge) > 0 and all(np.all(np.isfinite(res_m[n])) for n in names),
          f"{tag} --mixed grads finite, within {gd:.1e} (rel, worst tensor) of plain; "
          f"|grad {embed}| = {np.linalg.norm(ge):.4g} (flows)")
    with torch.no_grad():
        master = {n: w.detach().clone() for n, w in params.items()}
    if ste_exact:  # straight-through: mixed grads at the master == plain grads at the rounded weights
        lmix, gmix = grads_of(params, lambda p: loss_fn(p, True))
        with torch.no_grad():
            for n in rounded:
                params[n].copy_(gm.round_f16(master[n]))
        lpl, gpl = grads_of(params, lambda p: loss_fn(p, False))
        same = lmix == lpl and all(torch.equal(gmix[n], gpl[n]) for n in params)
        check(same, f"{tag} --mixed = plain model on fp16-rounded {len(rounded)} matmul weights "
                    f"(loss and all grads bit-identical: straight-through to the master)")
    with torch.no_grad():  # from here every master is fp16-representable: rounding is the identity
        for n, w in params.items():
            w.copy_(gm.round_f16(master[n]))
    lpl, gpl = grads_of(params, lambda p: loss_fn(p, False))
    lmix, gmix = grads_of(params, lambda p: loss_fn(p, True))
    check(lmix == lpl and all(torch.equal(gmix[n], gpl[n]) for n in params),
          f"{tag} fp16-representable masters: --mixed == plain bit for bit (loss, all grads)")
    bad, nprobe = [], 0
    with torch.no_grad():
        for n, w in params.items():  # +1/4 fp16 ulp: invisible iff the weight is read rounded
            for i, want in picks.get(n, [(int(torch.argmax(gpl[n].abs())), n not in rounded)]):
                flat, old = w.view(-1), w.view(-1)[i].item()
                flat[i] = old + 0.25 * float(np.spacing(np.float16(abs(old))))
                moved_plain = loss_fn(params, False).item() != lpl
                moved_mixed = loss_fn(params, True).item() != lmix
                flat[i] = old
                nprobe += 1
                if not moved_plain or moved_mixed != want:
                    bad.append(f"{n}[{i}](plain moved {moved_plain}, mixed moved {moved_mixed})")
    check(not bad, f"{tag} --mixed rounds exactly the {len(rounded)} matmul weights of {len(params)} tensors "
                   f"({nprobe} sub-ulp probes)" + (f"; wrong: {bad}" if bad else ""))
    with torch.no_grad():
        for n, w in params.items():
            w.copy_(master[n])


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


def check_optimizer(inp, res, model=gm):
    """Re-run the S steps with torch.optim.AdamW on manually clipped grads; `model` is the mirror
    module (gpt2_mirror or llama_mirror) whose load and forward_loss to use."""
    params, cfg, optim, decay, inputs, targets = model.load(inp, torch.float64)
    groups = [{"params": [w for n, w in params.items() if n in decay], "weight_decay": optim["wd"]},
              {"params": [w for n, w in params.items() if n not in decay], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1.0, betas=(optim["beta1"], optim["beta2"]), eps=optim["eps"])
    losses, norms = [], []
    for s in range(S):
        opt.zero_grad()
        loss = model.forward_loss(params, cfg, inputs[s], targets[s])
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
        rm = mirror(inp, os.path.join(d, "outm.safetensors"), "float64", "--precision", "mixed")
        params, cfg, _, _, inputs, targets = gm.load(inp, torch.float64)
        rounded = {n for n, s in gm.param_shapes(CFG) if len(s) == 2 and ".h." in n}
        check_mixed("gpt2", res, rm, params, lambda p, m: gm.forward_loss(p, cfg, inputs[0], targets[0], "mixed" if m else "fp32"),
                    rounded, {"transformer.wte.weight": [  # tied: lookup reads the master, lm_head rounds
                        (int(inputs[0][0, 0]) * CFG["channels"], True),
                        (min(set(range(CFG["vocab"])) - set(inputs[0].flatten().tolist())) * CFG["channels"], False)]},
                    "transformer.wte.weight", ste_exact=False)
        check(np.all(rm["grad.transformer.wte.weight"][CFG["vocab"]:] == 0), "gpt2 --mixed padded wte rows: zero grad")
        check_safetensors(d)
        check_llmc(inp, t, d)
    print("SELFCHECK " + ("PASSED" if not failures else f"FAILED ({len(failures)})"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
