"""PyTorch oracle ("mirror") for reftrain's GPT-2 training step.

Usage: /usr/bin/python3 tests/torch/gpt2_mirror.py IN.safetensors OUT.safetensors [--dtype float64|float32] [--precision fp32|mixed|bf16|bf16-pure|bf16-kahan]

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

--precision mixed: every matmul that reads a weight reads it rounded to fp16 and widened back (`round_f16`:
f32(f16(clamp(w, +-65504))), round-to-nearest-even), recomputed from the master at every step;
the gradient passes straight through to the master (fp32/--dtype) weight.  Rounded: c_attn,
attn.c_proj, mlp.c_fc, mlp.c_proj weights and the tied lm_head (logits = ln_f(x) @ round(wte).T).
Not rounded: the embedding lookups wte[tok], wpe[t], LayerNorm weights, biases.

--precision bf16: every product (the linear layers', the lm_head's and the attention's two) is
`Bf16Matmul`: both operands rounded to bf16 from their fp32 values (round to nearest even, bf16
subnormals to 0) and multiplied exactly in --dtype; its backward rounds the incoming gradient to
bf16 too (da = bf16(g) @ bf16(b).T, db = bf16(a).T @ bf16(g)). Biases, norms, softmax, GELU and
the loss stay unrounded. This is where reftrain's bf16 precision rounds, written independently of
its kernels: the sums here are exact, reftrain's are in the canonical bf16 order in fp32.

--precision bf16-pure: bf16's products, and after every AdamW step each weight, taken to f32, is
rounded to bf16 stochastically with the noise of its index in reftrain's mega-buffer
(`round_stochastic`, from the documented formula; IN's metadata `stochastic` = {"seed",
"offsets": {name: offset}}). The weights IN holds are bf16 values already.

--precision bf16-kahan: bf16's products, and each AdamW step added to its weight through a
compensation per weight: sum = comp - step; w = bf16(w + sum); comp = bf16(sum - (w_new - w)),
every bf16 rounded to nearest from the f32 value (`adamw_step`'s `kahan`). The weights IN holds
are bf16 values already.

Shared pieces used by llama_mirror.py: `load`, `adamw_step`, `products`, `train`, `cli`; replay.py
uses `forward_logits`.
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


def load(path, dtype, arch="gpt2", shapes=param_shapes, check_cfg=None):
    """Read IN; return (params dict name -> leaf tensor, cfg, optim, decay set, inputs, targets).
    `arch`/`shapes`/`check_cfg` (extra config validation, raises ValueError) select the family."""
    tensors, meta = read_safetensors(path)
    cfg, optim, decay = (json.loads(meta[k]) for k in ("config", "optim", "decay"))
    if cfg.get("arch") != arch or cfg["channels"] % cfg["heads"] or cfg["vocab"] > cfg["padded_vocab"]:
        raise ValueError(f"bad config {cfg}")
    if check_cfg is not None:
        check_cfg(cfg)
    params = {}
    for name, shape in shapes(cfg):
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


class _RoundF16(torch.autograd.Function):
    """Forward: f16(clamp(w, +-65504)) widened back to w's dtype (from w's fp32 value, as the
    C++ mirror is made from the fp32 master).  Backward: identity (straight-through), so the
    gradient lands on the master weight.  Same as `w + (w16 - w).detach()` but exactly w16."""

    @staticmethod
    def forward(ctx, w):
        return w.to(torch.float32).clamp(-65504.0, 65504.0).half().to(w.dtype)

    @staticmethod
    def backward(ctx, g):
        return g


def round_f16(w):
    """The fp16-mirror view of weight `w` for a matmul."""
    return _RoundF16.apply(w)


def round_bf16(t):
    """bf16(t) widened back to t's dtype, rounded from t's fp32 value (reftrain rounds fp32
    activations): round to nearest even (torch's conversion), then bf16 subnormals to 0."""
    r = t.to(torch.float32).to(torch.bfloat16).to(torch.float32)
    return torch.where(r.abs() < 2.0 ** -126, torch.zeros_like(r), r).to(t.dtype)


class Bf16Matmul(torch.autograd.Function):
    """a @ b with both operands rounded to bf16; the backward rounds the incoming gradient."""

    @staticmethod
    def forward(ctx, a, b):
        a16, b16 = round_bf16(a), round_bf16(b)
        ctx.save_for_backward(a16, b16)
        return a16 @ b16

    @staticmethod
    def backward(ctx, g):
        a16, b16 = ctx.saved_tensors
        g16 = round_bf16(g)
        return g16 @ b16.transpose(-2, -1), a16.transpose(-2, -1) @ g16


def products(precision):
    """(linear(x, w, b=None), matmul(a, b)) of a precision: the weight read through `round_f16`
    in mixed; every operand and gradient through bf16 (`Bf16Matmul`) in bf16."""
    if precision in ("bf16", "bf16-pure", "bf16-kahan"):
        def linear(x, w, b=None):
            y = Bf16Matmul.apply(x.reshape(-1, x.shape[-1]), w.t()).reshape(*x.shape[:-1], -1)
            return y if b is None else y + b
        return linear, Bf16Matmul.apply
    if precision == "mixed":
        return (lambda x, w, b=None: F.linear(x, round_f16(w), b)), torch.matmul
    return F.linear, torch.matmul


def attend(q, k, v, matmul, attention="materialised"):
    """Causal self-attention of q, k, v [B, NH, T, hs]: the probabilities materialised, with the
    products `matmul` (the oracle's), or "sdpa": PyTorch's F.scaled_dot_product_attention, what
    PyTorch users run (bench/torch_step.py's peer; fp32 and autocast only)."""
    T, hs = q.shape[-2], q.shape[-1]
    if attention == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    att = matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return matmul(att, v)


def forward_logits(p, cfg, idx, precision="fp32", attention="materialised"):
    """Logits [B, T, Vp] of the GPT-2 model with params `p` on idx [B, T] (on idx's device); the
    products as `products(precision)` makes them, the attention as `attend`."""
    B, T = idx.shape
    C, NH = cfg["channels"], cfg["heads"]
    hs = C // NH
    linear, matmul = products(precision)
    wte = p["transformer.wte.weight"]
    x = wte[idx] + p["transformer.wpe.weight"][:T]
    for l in range(cfg["layers"]):
        w = lambda s: p[f"transformer.h.{l}.{s}"]  # noqa: E731
        h = F.layer_norm(x, (C,), w("ln_1.weight"), w("ln_1.bias"), 1e-5)
        q, k, v = linear(h, w("attn.c_attn.weight"), w("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, hs).transpose(1, 2) for t in (q, k, v))
        y = attend(q, k, v, matmul, attention).transpose(1, 2).reshape(B, T, C)
        x = x + linear(y, w("attn.c_proj.weight"), w("attn.c_proj.bias"))
        h = F.layer_norm(x, (C,), w("ln_2.weight"), w("ln_2.bias"), 1e-5)
        h = F.gelu(linear(h, w("mlp.c_fc.weight"), w("mlp.c_fc.bias")), approximate="tanh")
        x = x + linear(h, w("mlp.c_proj.weight"), w("mlp.c_proj.bias"))
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    return linear(x, wte)  # [B, T, Vp]


def forward_loss(p, cfg, idx, targets, precision="fp32", attention="materialised"):
    """Mean cross-entropy of the GPT-2 model with params `p` on idx/targets [B, T]."""
    B, T = idx.shape
    V = cfg["vocab"]
    logits = forward_logits(p, cfg, idx, precision, attention)
    return F.cross_entropy(logits[..., :V].reshape(B * T, V), targets.reshape(B * T))


@torch.no_grad()
def adamw_step(params, state, optim, decay, lr, t, kahan=None):
    """Clip by global norm, then AdamW exactly as specified; return (grad_norm, clip). With
    `kahan` (a dict, bf16-kahan), the step goes through each weight's compensation, kept there."""
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
        step = lr * ((m / bc1) / (torch.sqrt(v / bc2) + eps) + wd_p * w)
        if kahan is None:
            w.sub_(step)
            continue
        comp = kahan.setdefault(name, torch.zeros_like(w))
        total = comp - step
        w_new = round_bf16(w + total)
        comp.copy_(round_bf16(total - (w_new - w)))
        w.copy_(w_new)
    return grad_norm, clip


M32 = 0xFFFFFFFF


def mix32(x):
    """lowbias32 on uint32 numpy arrays (their products wrap mod 2^32)."""
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7FEB352D)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846CA68B)
    return x ^ (x >> np.uint32(16))


@torch.no_grad()
def round_stochastic(params, stochastic, t):
    """bf16-pure: every weight, as f32, rounded to bf16 with the noise of its mega-buffer index:
    noise = mix((offset + i) ^ mix(t ^ mix(seed))) >> 16; bf16 = (bits + noise) >> 16, a
    subnormal result +-0 (no NaN arises here)."""
    key = mix32(np.array([t], dtype=np.uint32) ^ mix32(np.array([stochastic["seed"]], dtype=np.uint32)))
    for name, w in params.items():
        u = w.detach().to(torch.float32).numpy().reshape(-1).view(np.uint32)
        index = (np.arange(u.size, dtype=np.uint64) + stochastic["offsets"][name]) & M32
        noise = mix32(index.astype(np.uint32) ^ key) >> np.uint32(16)
        r = (u + noise) >> np.uint32(16)
        r = np.where((r & 0x7F80) == 0, r & 0x8000, r).astype(np.uint32)
        w.copy_(torch.from_numpy((r << np.uint32(16)).view(np.float32).reshape(w.shape)).to(w.dtype))


def train(params, optim, decay, inputs, targets, loss_fn, stochastic=None, kahan=False):
    """Run the S steps (loss_fn(params, idx, tgt) -> scalar loss) and return the OUT dict. With
    `stochastic` ({"seed", "offsets": {name: mega-buffer offset}}: bf16-pure), each step's new
    weights are rounded to bf16 by `round_stochastic`; with `kahan` (bf16-kahan), each step is
    added through a compensation per weight (`adamw_step`)."""
    out, losses, norms, clips, state = {}, [], [], [], {}
    compensation = {} if kahan else None
    for s in range(inputs.shape[0]):
        for w in params.values():
            w.grad = None
        loss = loss_fn(params, inputs[s], targets[s])
        loss.backward()
        losses.append(loss.item())
        if s == 0:
            out.update({f"grad.{n}": w.grad.double().numpy().copy() for n, w in params.items()})
        gn, c = adamw_step(params, state, optim, decay, optim["lrs"][s], s + 1, compensation)
        if stochastic is not None:
            round_stochastic(params, stochastic, s + 1)
        norms.append(gn)
        clips.append(c)
    out.update({f"final.{n}": w.detach().double().numpy().copy() for n, w in params.items()})
    out["loss"] = np.array(losses[:1], dtype=np.float64)
    out["losses"], out["grad_norms"], out["clips"] = (np.array(a, dtype=np.float64) for a in (losses, norms, clips))
    return out


def stochastic_of(in_path, precision):
    """bf16-pure's rounding settings from IN's metadata `stochastic`, else None."""
    if precision != "bf16-pure":
        return None
    return json.loads(read_safetensors(in_path)[1]["stochastic"])


def run(in_path, out_path, dtype=torch.float64, precision="fp32"):
    params, cfg, optim, decay, inputs, targets = load(in_path, dtype)
    out = train(params, optim, decay, inputs, targets,
                lambda p, idx, tgt: forward_loss(p, cfg, idx, tgt, precision),
                stochastic_of(in_path, precision), precision == "bf16-kahan")
    write_safetensors(out_path, out)
    return out


def cli(doc, run_fn):
    """Shared command line: IN OUT [--dtype float64|float32] [--precision P]; prints a summary."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("inp", metavar="IN.safetensors")
    ap.add_argument("out", metavar="OUT.safetensors")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--precision", choices=["fp32", "mixed", "bf16", "bf16-pure", "bf16-kahan"],
                    default="fp32",
                    help="mixed: matmul weights read through an fp16 rounding; bf16: every product's "
                         "operands and gradient through a bf16 rounding; bf16-pure: bf16's, and "
                         "each step's weights rounded to bf16 stochastically; bf16-kahan: bf16's, "
                         "each step added through a bf16 compensation per weight")
    a = ap.parse_args()
    out = run_fn(a.inp, a.out, getattr(torch, a.dtype), a.precision)
    print(f"steps={len(out['losses'])} loss0={out['losses'][0]:.10g} "
          f"loss_last={out['losses'][-1]:.10g} grad_norm0={out['grad_norms'][0]:.6g}")


def main():
    cli(__doc__, run)


if __name__ == "__main__":
    main()
