"""PyTorch mirror of Hugging Face transformers' GPT2LMHeadModel and LlamaForCausalLM: the oracle
for reftrain's Hugging Face import and export (no `transformers` or `safetensors` package needed).

The modules follow transformers' modeling_gpt2.py and modeling_llama.py: the same module tree
and attribute names, so every tensor name comes from state_dict() as it does there, and the same
layouts: GPT-2's Conv1D holds its weight [in, out] and computes y = x @ W + b (torch.addmm);
nn.Linear holds [out, in]. GPT-2: learned positions, LayerNorm(layer_norm_epsilon), attention
scaled by 1/sqrt(head_dim) with the causal mask from the `bias` buffer, MLP c_fc -> gelu_new (or
the exact erf gelu where activation_function is "gelu") -> c_proj, lm_head tied to wte. Llama: LlamaRMSNorm (x * rsqrt(mean(x^2) + eps) * weight), RoPE
with rotate_half (inv_freq = theta^(-2i/head_dim); cos/sin = cat(freqs, freqs)), SwiGLU MLP
down(silu(gate(x)) * up(x)), untied lm_head. Everything runs in float64.

Usage: /usr/bin/python3 tests/torch/hf_mirror.py JOBS.json
JOBS.json is a list of jobs, run in order in one process:
  {"op": "make", "dir": D, "arch": "gpt2"|"gpt2_gelu"|"llama", "seed": S, "dtype": "F32"|"F16"|"BF16",
   "no_prefix": bool, "lm_head": bool, "buffers": bool, "out": OUT}
      Random tiny weights (the SHAPES below) saved as save_pretrained saves them: D/config.json
      and D/model.safetensors (metadata {"format": "pt"}, tensors in `dtype`, the tied GPT-2
      lm_head left out). no_prefix: GPT-2 names without "transformer." (a GPT2Model's file);
      lm_head: the tied lm_head.weight stored too; buffers: GPT-2's attn.bias (BOOL mask) and
      attn.masked_bias stored, as older transformers did. Then as "loss" on D.
  {"op": "loss", "dir": D, "out": OUT}
      Loads D by HF names (config.json gives the shape), runs the model on fixed tokens and
      writes OUT: inputs, targets (I32 [B, T]), logits (F64 [B, T, V]) and loss (F64 [1], the
      mean cross-entropy over the B*T positions).
The tokens: numpy.random.default_rng(1234).integers(0, V, size=(2, B, T)), B = 3, T = 11.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import write_safetensors  # noqa: E402

SHAPES = {
    "gpt2": {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 61,
             "n_positions": 16, "n_embd": 24, "n_layer": 2, "n_head": 3, "n_inner": None,
             "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
             "tie_word_embeddings": True, "torch_dtype": "float32"},
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 61,
              "hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 2,
              "num_attention_heads": 3, "num_key_value_heads": 3, "max_position_embeddings": 16,
              "rms_norm_eps": 1e-5, "rope_theta": 500.0, "rope_scaling": None,
              "hidden_act": "silu", "tie_word_embeddings": False, "torch_dtype": "float32"},
}
# GPT-2's shape with the exact GELU (transformers' ACT2FN["gelu"]: torch's erf GELU).
SHAPES["gpt2_gelu"] = {**SHAPES["gpt2"], "activation_function": "gelu"}
BATCH, SEQ = 3, 11
DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "F64": torch.float64, "BOOL": torch.bool}
CODE = {v: k for k, v in DTYPES.items()}
SIZE = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "BOOL": 1}


# ---- GPT2LMHeadModel ---------------------------------------------------------------------------

class Conv1D(nn.Module):
    """transformers.pytorch_utils.Conv1D: weight [nx (in), nf (out)], y = x @ weight + bias."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        n = cfg["n_positions"]
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n),
                             persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim, self.num_heads = cfg["n_embd"], cfg["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.embed_dim, dim=2)
        q, k, v = (t.view(B, T, self.num_heads, self.head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
        w = (q @ k.transpose(-1, -2)) / (v.size(-1) ** 0.5)
        w = torch.where(self.bias[:, :, :T, :T], w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        y = (w.softmax(dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.c_proj(y)


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        inner = cfg["n_inner"] if cfg.get("n_inner") is not None else 4 * C
        self.c_fc, self.c_proj = Conv1D(inner, C), Conv1D(C, inner)
        self.act = {"gelu_new": gelu_new, "gelu": F.gelu}[cfg["activation_function"]]

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, eps = cfg["n_embd"], cfg["layer_norm_epsilon"]
        self.ln_1, self.attn = nn.LayerNorm(C, eps=eps), GPT2Attention(cfg)
        self.ln_2, self.mlp = nn.LayerNorm(C, eps=eps), GPT2MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.wte, self.wpe = nn.Embedding(cfg["vocab_size"], C), nn.Embedding(cfg["n_positions"], C)
        self.h = nn.ModuleList(GPT2Block(cfg) for _ in range(cfg["n_layer"]))
        self.ln_f = nn.LayerNorm(C, eps=cfg["layer_norm_epsilon"])

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    tied = True

    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_word_embeddings

    def forward(self, idx):
        return self.lm_head(self.transformer(idx))


# ---- LlamaForCausalLM --------------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    def __init__(self, C, eps):
        super().__init__()
        self.weight, self.variance_epsilon = nn.Parameter(torch.ones(C)), eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.variance_epsilon))


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, T):
        freqs = torch.outer(torch.arange(T, dtype=torch.float64), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, self.num_heads = cfg["hidden_size"], cfg["num_attention_heads"]
        self.head_dim = C // self.num_heads
        self.q_proj, self.k_proj = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)
        self.v_proj, self.o_proj = nn.Linear(C, C, bias=False), nn.Linear(C, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = (p(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin  # apply_rotary_pos_emb
        w = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = w.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
        y = (w.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.o_proj(y)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, Fw = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj, self.up_proj = nn.Linear(C, Fw, bias=False), nn.Linear(C, Fw, bias=False)
        self.down_proj = nn.Linear(Fw, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        self.self_attn, self.mlp = LlamaAttention(cfg), LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(C, eps)
        self.post_attention_layernorm = LlamaRMSNorm(C, eps)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["hidden_size"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], C)
        self.layers = nn.ModuleList(LlamaDecoderLayer(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = LlamaRMSNorm(C, cfg["rms_norm_eps"])
        self.rotary_emb = LlamaRotaryEmbedding(C // cfg["num_attention_heads"], cfg["rope_theta"])

    def forward(self, idx):
        x = self.embed_tokens(idx)
        cos, sin = self.rotary_emb(idx.shape[1])
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    tied = False

    def __init__(self, cfg):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, idx):
        return self.lm_head(self.model(idx))


MODELS = {"gpt2": GPT2LMHeadModel, "gpt2_gelu": GPT2LMHeadModel, "llama": LlamaForCausalLM}


# ---- safetensors with torch dtypes (bf16 has no numpy type) -----------------------------------

def save_file(tensors, path, metadata):
    header, chunks, off = {"__metadata__": metadata}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        flat = t.reshape(-1)
        raw = flat.numpy().tobytes() if t.dtype == torch.bool else flat.view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": CODE[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hb = json.dumps(header).encode()
    hb += b" " * (-len(hb) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)) + hb + b"".join(chunks))


def load_file(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        raw = bytearray(buf[8 + n + b: 8 + n + end])
        dt = DTYPES[e["dtype"]]
        t = torch.frombuffer(raw, dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
        if dt == torch.bool:
            t = t.to(torch.bool)
        else:
            t = t.view(dt)
        out[name] = t.reshape(e["shape"])
    return out, meta


# ---- jobs --------------------------------------------------------------------------------------

def random_state(model, seed):
    """Every parameter drawn in float32 from a seeded generator: norm weights near 1, biases
    small, matrices and embeddings normal(0, 0.2)."""
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, p in model.state_dict().items():
        r = torch.randn(p.shape, generator=g, dtype=torch.float32)
        if "ln_" in name or "norm" in name:
            state[name] = 1.0 + 0.1 * r if name.endswith("weight") else 0.1 * r
        else:
            state[name] = (0.1 if name.endswith("bias") else 0.2) * r
    if model.tied:
        state["lm_head.weight"] = state["transformer.wte.weight"]
    return state


def make(job):
    arch, d = job["arch"], job["dir"]
    cfg = SHAPES[arch]
    os.makedirs(d, exist_ok=True)
    model = MODELS[arch](cfg)
    state = random_state(model, job["seed"])
    dtype = DTYPES[job.get("dtype", "F32")]
    out = {}
    for name, t in state.items():
        if model.tied and name == "lm_head.weight" and not job.get("lm_head"):
            continue  # save_pretrained drops the tied copy
        if arch == "gpt2" and job.get("no_prefix") and name.startswith("transformer."):
            name = name[len("transformer."):]
        out[name] = t.to(dtype)
    if job.get("buffers"):
        prefix = "" if job.get("no_prefix") else "transformer."
        for l in range(cfg["n_layer"]):
            attn = model.transformer.h[l].attn
            out[f"{prefix}h.{l}.attn.bias"] = attn.bias
            out[f"{prefix}h.{l}.attn.masked_bias"] = attn.masked_bias.to(torch.float32)
    save_file(out, os.path.join(d, "model.safetensors"), {"format": "pt"})
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    loss({"dir": d, "out": job["out"]})


def load_dir(d):
    """The model of D, from D/config.json and D/model.safetensors by HF names, in float64."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    model = MODELS[cfg["model_type"]](cfg).double()
    tensors, meta = load_file(os.path.join(d, "model.safetensors"))
    if meta.get("format") != "pt":
        raise ValueError(f"{d}: metadata format {meta.get('format')!r}, transformers wants 'pt'")
    state = {}
    for name, t in tensors.items():
        if name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue  # GPT-2's mask buffers
        if cfg["model_type"] == "gpt2" and not name.startswith(("transformer.", "lm_head.")):
            name = "transformer." + name
        state[name] = t.to(torch.float64)
    if model.tied:
        wte = state["transformer.wte.weight"]
        if "lm_head.weight" in state and not torch.equal(state["lm_head.weight"], wte):
            raise ValueError(f"{d}: lm_head.weight differs from the tied wte")
        state["lm_head.weight"] = wte
    model.load_state_dict(state, strict=True)  # every name and shape, nothing extra
    return model, cfg


@torch.no_grad()
def loss(job):
    model, cfg = load_dir(job["dir"])
    V = cfg["vocab_size"]
    tokens = np.random.default_rng(1234).integers(0, V, size=(2, BATCH, SEQ))
    inputs, targets = torch.tensor(tokens[0]), torch.tensor(tokens[1])
    logits = model(inputs)
    value = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
    write_safetensors(job["out"], {"inputs": tokens[0].astype(np.int32),
                                   "targets": tokens[1].astype(np.int32),
                                   "logits": logits.numpy(),
                                   "loss": np.array([value.item()])})
    print(f"{job['dir']}: loss {value.item():.10g}")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    for job in jobs:
        {"make": make, "loss": loss}[job["op"]](job)


if __name__ == "__main__":
    main()
