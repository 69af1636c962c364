"""PyTorch oracle ("mirror") for reftrain's GPT-2 training step.

Usage: /usr/bin/python3 tests/torch/gpt2_mirror.py IN.safetensors OUT.safetensors [--dtype float64|float32]

IN:  every GPT-2 parameter (F32, nanoGPT names, nn.Linear [out, in] layout), `inputs` and
     `targets` (I32 [S, B, T], the batch of each of S optimizer steps), and __metadata__:
       config = {"arch":"gpt2","layers":L,"heads":NH,"channels":C,"vocab":V,"padded_vocab":Vp,"max_seq":maxT}
       optim  = {"lrs":[...S...],"beta1":..,"beta2":..,"eps":..,"wd":..,"clip":..}
       decay  = [names of parameters that take weight decay]
OUT (all F64): `loss` [1] step-0 loss; `grad.<name>` step-0 gradient of every parameter (before
     any update); `losses` [S]; `grad_norms` [S]; `clips` [S].

Model: x = wte[tok] + wpe[t]; per layer x += attn(ln_1(x)); x += mlp(ln_2(x)) with tanh GELU;
logits = ln_f(x) @ wte.T (tied, all Vp columns); loss = mean cross-entropy over the first V
columns.  Optimizer: AdamW with global-norm clipping, written out by hand (see `adamw_step`).
Everything runs on the CPU in --dtype (float32 weights are converted up for float64).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402

LAYER_PARAMS = [  # (suffix, shape as a function of C)
    ("ln_1.weight", lambda C: [C]), ("ln_1.bias", lambda C: [C]),
    ("attn.c_attn.weight", lambda C: [3 * C, C]), ("attn.c_attn.bias", lambda C: [3 * C]),
    ("attn.c_proj.weight", lambda C: [C, C]), ("attn.c_proj.bias", lambda C: [C]),
    ("ln_2.weight", lambda C: [C]), ("ln_2.bias", lambda C: [C]),
    ("mlp.c_fc.weight", lambda C: [4 * C, C]), ("mlp.c_fc.bias", lambda C: [4 * C]),
    ("mlp.c_proj.weight", lambda C: [C, 4 * C]), ("mlp.c_proj.bias", lambda C: [C]),
]


def param_shapes(cfg):
    """Ordered dict-like list of (name, shape) for the GPT-2 parameters of `cfg`."""
    L, C = cfg["layers"], cfg["channels"]
    out = [("transformer.wte.weight", [cfg["padded_vocab"], C]),
           ("transformer.wpe.weight", [cfg["max_seq"], C])]
    for l in range(L):
        out += [(f"transformer.h.{l}.{s}", f(C)) for s, f in LAYER_PARAMS]
    out += [("transformer.ln_f.weight", [C]), ("transformer.ln_f.bias", [C])]
    return out


def load(path, dtype):
    """Read IN; return (params dict name -> leaf tensor, cfg, optim, decay set, inputs, targets)."""
    tensors, meta = read_safetensors(path)
    cfg, optim, decay = (json.loads(meta[k]) for k in ("config", "optim", "decay"))
    if cfg.get("arch") != "gpt2" or cfg["channels"] % cfg["heads"] or cfg["vocab"] > cfg["padded_vocab"]:
        raise ValueError(f"bad config {cfg}")
    params = {}
    for name, shape in param_shapes(cfg):
        if name not in tensors or list(tensors[name].shape) != shape:
            raise ValueError(f"param {name}: expected shape {shape}, got "
                             f"{None if name not in tensors else list(tensors[name].shape)}")
        params[name] = torch.tensor(tensors[name], dtype=dtype, requires_grad=True)
    unknown = set(decay) - set(params)
    if unknown:
        raise ValueError(f"decay names unknown params: {sorted(unknown)}")
    inputs = torch.tensor(tensors["inputs"].astype(np.int64))
    targets = torch.tensor(tensors["targets"].astype(np.int64))
    S, B, T = inputs.shape
    if targets.shape != inputs.shape or S < 1 or T > cfg["max_seq"] or len(optim["lrs"]) != S:
        raise ValueError(f"inputs {tuple(inputs.shape)} / targets {tuple(targets.shape)} / "
                         f"{len(optim['lrs'])} lrs do not fit config {cfg}")
    for n, t in (("inputs", inputs), ("targets", targets)):
        if t.numel() and (t.min() < 0 or t.max() >= cfg["vocab"]):
            raise ValueError(f"{n} has token ids outside [0, {cfg['vocab']})")
    return params, cfg, optim, set(decay), inputs, targets


def forward_loss(p, cfg, idx, targets):
    """Mean cross-entropy of the GPT-2 model with params `p` on idx/targets [B, T]."""
    B, T = idx.shape
    C, NH, V = cfg["channels"], cfg["heads"], cfg["vocab"]
    hs = C // NH
    wte = p["transformer.wte.weight"]
    x = wte[idx] + p["transformer.wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["layers"]):
        w = lambda s: p[f"transformer.h.{l}.{s}"]  # noqa: E731
        h = F.layer_norm(x, (C,), w("ln_1.weight"), w("ln_1.bias"), 1e-5)
        q, k, v = F.linear(h, w("attn.c_attn.weight"), w("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, w("attn.c_proj.weight"), w("attn.c_proj.bias"))
        h = F.layer_norm(x, (C,), w("ln_2.weight"), w("ln_2.bias"), 1e-5)
        h = F.gelu(F.linear(h, w("mlp.c_fc.weight"), w("mlp.c_fc.bias")), approximate="tanh")
        x = x + F.linear(h, w("mlp.c_proj.weight"), w("mlp.c_proj.bias"))
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    logits = x @ wte.t()  # [B, T, Vp]
    return F.cross_entropy(logits[..., :V].reshape(B * T, V), targets.reshape(B * T))


@torch.no_grad()
def adamw_step(params, state, optim, decay, lr, t):
    """Clip by global norm, then AdamW exactly as specified; return (grad_norm, clip)."""
    b1, b2, eps, wd, clip_max = (optim[k] for k in ("beta1", "beta2", "eps", "wd", "clip"))
    norm_sq = sum(torch.where(torch.isfinite(w.grad), w.grad, torch.zeros_like(w.grad)).pow(2).sum()
                  for w in params.values())
    grad_norm = math.sqrt(float(norm_sq))
    clip = min(1.0, clip_max / max(grad_norm, 1e-6)) if clip_max > 0 else 1.0
    bc1, bc2 = max(1 - b1 ** t, 1e-12), max(1 - b2 ** t, 1e-12)
    for name, w in params.items():
        g = torch.where(torch.isfinite(w.grad), w.grad * clip, torch.zeros_like(w.grad))
        m, v = state.setdefault(name, (torch.zeros_like(w), torch.zeros_like(w)))
        m.mul_(b1).add_((1 - b1) * g)
        v.mul_(b2).add_((1 - b2) * g * g)
        wd_p = wd if name in decay else 0.0
        w.sub_(lr * ((m / bc1) / (torch.sqrt(v / bc2) + eps) + wd_p * w))
    return grad_norm, clip


def run(in_path, out_path, dtype=torch.float64):
    params, cfg, optim, decay, inputs, targets = load(in_path, dtype)
    out, losses, norms, clips, state = {}, [], [], [], {}
    for s in range(inputs.shape[0]):
        for w in params.values():
            w.grad = None
        loss = forward_loss(params, cfg, inputs[s], targets[s])
        loss.backward()
        losses.append(loss.item())
        if s == 0:
            out.update({f"grad.{n}": w.grad.double().numpy().copy() for n, w in params.items()})
        gn, c = adamw_step(params, state, optim, decay, optim["lrs"][s], s + 1)
        norms.append(gn)
        clips.append(c)
    out["loss"] = np.array(losses[:1], dtype=np.float64)
    out["losses"], out["grad_norms"], out["clips"] = (np.array(a, dtype=np.float64) for a in (losses, norms, clips))
    write_safetensors(out_path, out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inp", metavar="IN.safetensors")
    ap.add_argument("out", metavar="OUT.safetensors")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    a = ap.parse_args()
    out = run(a.inp, a.out, getattr(torch, a.dtype))
    print(f"steps={len(out['losses'])} loss0={out['losses'][0]:.10g} "
          f"loss_last={out['losses'][-1]:.10g} grad_norm0={out['grad_norms'][0]:.6g}")


if __name__ == "__main__":
    main()
