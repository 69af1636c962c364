"""PyTorch oracle ("mirror") for reftrain's llama training step.

Usage: /usr/bin/python3 tests/torch/llama_mirror.py IN.safetensors OUT.safetensors [--dtype float64|float32] [--precision fp32|mixed|bf16|bf16-pure|bf16-kahan]

IN:  every llama parameter (F32, HF names, nn.Linear [out, in] layout, no biases):
       model.embed_tokens.weight [Vp, C]
       model.layers.{l}.input_layernorm.weight [C]
       model.layers.{l}.self_attn.{q,k,v,o}_proj.weight [C, C]
       model.layers.{l}.post_attention_layernorm.weight [C]
       model.layers.{l}.mlp.{gate,up}_proj.weight [F, C], model.layers.{l}.mlp.down_proj.weight [C, F]
       model.norm.weight [C]
       lm_head.weight [Vp, C] (untied)
     `inputs`, `targets` (I32 [S, B, T]) and __metadata__ as for gpt2_mirror.py, with
       config = {"arch":"llama","layers":L,"heads":NH,"channels":C,"ffn":F,"vocab":V,
                 "padded_vocab":Vp,"max_seq":maxT,"rope_theta":10000.0,"z_loss":z}
       optim, decay as for gpt2.
OUT (all F64): `loss` [1] step-0 loss; `grad.<name>` step-0 gradient of every parameter;
     `losses` [S]; `grad_norms` [S]; `clips` [S].

Model: x = embed[tok]; per layer
  h = rmsnorm(x)*w_in;  q, k, v = h Wq^T, h Wk^T, h Wv^T (NH heads of hs = C/NH);
  q, k = rope(q), rope(k);  x += softmax(causal(q k^T / sqrt(hs))) v Wo^T;
  h = rmsnorm(x)*w_post;  x += (silu(h Wgate^T) * (h Wup^T)) Wdown^T;
logits = (rmsnorm(x)*w_norm) lm_head^T (all Vp columns);
loss = mean_{B*T} cross_entropy(logits[:, :V]) + z * mean_{B*T} lse^2, lse = logsumexp(logits[:, :V]).
RMSNorm: x / sqrt(mean(x^2) + 1e-5) * w.
RoPE (HF rotate-half): inv_freq_i = theta^(-2i/hs), i < hs/2; angle(t, i) = t * inv_freq_i for
positions t = 0..T-1; cos/sin = cat(angle, angle).cos()/.sin() (element i and i + hs/2 share a
frequency); rope(x) = x*cos + rotate_half(x)*sin, rotate_half(x) = cat(-x[hs/2:], x[:hs/2]).
cos/sin are computed in float64 and cast to --dtype.
Optimizer: gpt2_mirror.adamw_step (the same hand-written AdamW with global-norm clipping).
--precision mixed: q/k/v/o/gate/up/down and lm_head weights read through gpt2_mirror.round_f16
(fp16 rounding, straight-through gradient to the master); the embedding lookup and norms read the
master. --precision bf16: every product through gpt2_mirror.Bf16Matmul, as in gpt2_mirror.py;
bf16-pure: the same, and the weights rounded stochastically after each step, as there;
bf16-kahan: the same, each step added through a compensation per weight, as there.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_mirror as gm  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

LAYER_PARAMS = [  # (suffix, shape as a function of C, F)
    ("input_layernorm.weight", lambda C, F_: [C]),
    ("self_attn.q_proj.weight", lambda C, F_: [C, C]),
    ("self_attn.k_proj.weight", lambda C, F_: [C, C]),
    ("self_attn.v_proj.weight", lambda C, F_: [C, C]),
    ("self_attn.o_proj.weight", lambda C, F_: [C, C]),
    ("post_attention_layernorm.weight", lambda C, F_: [C]),
    ("mlp.gate_proj.weight", lambda C, F_: [F_, C]),
    ("mlp.up_proj.weight", lambda C, F_: [F_, C]),
    ("mlp.down_proj.weight", lambda C, F_: [C, F_]),
]
RMS_EPS = 1e-5


def param_shapes(cfg):
    """Ordered list of (name, shape) for the llama parameters of `cfg`."""
    L, C, F_ = cfg["layers"], cfg["channels"], cfg["ffn"]
    out = [("model.embed_tokens.weight", [cfg["padded_vocab"], C])]
    for l in range(L):
        out += [(f"model.layers.{l}.{s}", f(C, F_)) for s, f in LAYER_PARAMS]
    out += [("model.norm.weight", [C]), ("lm_head.weight", [cfg["padded_vocab"], C])]
    return out


def check_cfg(cfg):
    missing = [k for k in ("layers", "heads", "channels", "ffn", "vocab", "padded_vocab", "max_seq",
                           "rope_theta", "z_loss") if k not in cfg]
    if missing:
        raise ValueError(f"llama config lacks {missing}: {cfg}")
    if (cfg["channels"] // cfg["heads"]) % 2 or cfg["ffn"] < 1 or cfg["rope_theta"] <= 0 or cfg["z_loss"] < 0:
        raise ValueError(f"bad llama config (need even head size, ffn >= 1, rope_theta > 0, z_loss >= 0): {cfg}")


def load(path, dtype):
    return gm.load(path, dtype, arch="llama", shapes=param_shapes, check_cfg=check_cfg)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + RMS_EPS) * w


def rope_cos_sin(T, hs, theta, dtype, device=None):
    """cos, sin [T, hs] (HF layout: the hs/2 frequencies repeated over both halves), computed
    on the CPU in float64 and then cast to `dtype` on `device`."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))  # [hs/2]
    freqs = torch.outer(torch.arange(T, dtype=torch.float64), inv_freq)              # [T, hs/2]
    emb = torch.cat((freqs, freqs), dim=-1)                                            # [T, hs]
    return emb.cos().to(device=device, dtype=dtype), emb.sin().to(device=device, dtype=dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x, cos, sin):
    """x [..., T, hs] (heads before T), cos/sin [T, hs]."""
    return x * cos + rotate_half(x) * sin


def forward_logits(p, cfg, idx, precision="fp32", attention="materialised"):
    """Logits [B, T, Vp] of the llama model with params `p` on idx [B, T]; the products as
    gpt2_mirror.products(precision) makes them, the attention as gpt2_mirror.attend."""
    B, T = idx.shape
    C, NH = cfg["channels"], cfg["heads"]
    hs = C // NH
    linear, matmul = gm.products(precision)
    x = p["model.embed_tokens.weight"][idx]  # [B, T, C], master (never rounded)
    cos, sin = rope_cos_sin(T, hs, cfg["rope_theta"], x.dtype, x.device)
    for l in range(cfg["layers"]):
        pre = f"model.layers.{l}."
        h = rms_norm(x, p[pre + "input_layernorm.weight"])
        q, k, v = (linear(h, p[pre + f"self_attn.{n}_proj.weight"]).view(B, T, NH, hs).transpose(1, 2)
                   for n in ("q", "k", "v"))  # [B, NH, T, hs]
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = gm.attend(q, k, v, matmul, attention).transpose(1, 2).reshape(B, T, C)
        x = x + linear(y, p[pre + "self_attn.o_proj.weight"])
        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"])
        g = F.silu(linear(h, p[pre + "mlp.gate_proj.weight"])) * linear(h, p[pre + "mlp.up_proj.weight"])
        x = x + linear(g, p[pre + "mlp.down_proj.weight"])
    x = rms_norm(x, p["model.norm.weight"])
    return linear(x, p["lm_head.weight"])


def forward_loss(p, cfg, idx, targets, precision="fp32", attention="materialised"):
    """Mean cross-entropy (+ z-loss) of the llama model with params `p` on idx/targets [B, T]."""
    B, T = idx.shape
    V, z = cfg["vocab"], cfg["z_loss"]
    logits = forward_logits(p, cfg, idx, precision, attention)[..., :V].reshape(B * T, V)  # first V of Vp columns
    loss = F.cross_entropy(logits, targets.reshape(B * T))
    if z:
        loss = loss + z * torch.logsumexp(logits, dim=-1).pow(2).mean()
    return loss


def run(in_path, out_path, dtype=torch.float64, precision="fp32"):
    params, cfg, optim, decay, inputs, targets = load(in_path, dtype)
    out = gm.train(params, optim, decay, inputs, targets,
                   lambda p, idx, tgt: forward_loss(p, cfg, idx, tgt, precision),
                   gm.stochastic_of(in_path, precision), precision == "bf16-kahan")
    write_safetensors(out_path, out)
    return out


def main():
    gm.cli(__doc__, run)


if __name__ == "__main__":
    main()
