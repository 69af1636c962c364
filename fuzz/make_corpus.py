"""Write the fuzz targets' seed corpus: a few small valid files and truncated copies of them.

Usage: /usr/bin/python3 fuzz/make_corpus.py BUILD/reftrain
Writes fuzz/corpus/<target>/ (the committed corpus; each file a few KB at most). The files come
from the project's writers: tests/torch/safetensors_io.py and tests/torch/llmc_files.py for the
binary formats, `reftrain train --trace` itself for the trace, and `reftrain tokenizer train` and
`reftrain export` for the tokenizer files and Hugging Face configs.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch"))
from llmc_files import header  # noqa: E402
from safetensors_io import write_safetensors  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def with_cuts(target, name, data, cuts):
    """The file, and copies cut to each length in `cuts` (negative: that many bytes short)."""
    put(target, name, data)
    for c in cuts:
        put(target, f"{name}.cut{len(data) + c if c < 0 else c}", data[:c])


def safetensors_bytes(tensors, metadata=None):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.safetensors")
        write_safetensors(path, tensors, metadata)
        with open(path, "rb") as f:
            return f.read()


def safetensors_corpus():
    rng = np.random.default_rng(0)
    every_dtype = {
        "w.f32": rng.standard_normal((2, 3)).astype("<f4"),
        "w.f64": np.array([3.141592653589793, -2.5e-300], dtype="<f8"),
        "w.f16": np.array([1.0, -2.0, 65504.0], dtype="<f2"),
        "w.i64": np.array([[-1], [1 << 40]], dtype="<i8"),
        "w.i32": np.array([-5, 7, 2147483647], dtype="<i4"),
        "w.u16": np.array([0, 65535, 50256], dtype="<u2"),
        "w.u8": np.array([0, 1, 255], dtype="u1"),
        "scalar": np.array(42.0, dtype="<f4"),
        "empty": np.zeros((0, 4), dtype="<f4"),
    }
    meta = {"format": "reftrain-checkpoint", "config": '{"layers":2,"heads":2}'}
    with_cuts("safetensors", "every_dtype", safetensors_bytes(every_dtype, meta), [-3, 40, 5])
    put("safetensors", "empty", safetensors_bytes({}))
    put("safetensors", "metadata_only", safetensors_bytes({}, {"step": "20"}))
    two = {"a": np.arange(4, dtype="<f4"), "b": np.arange(6, dtype="<i4").reshape(2, 3)}
    with_cuts("safetensors", "two_tensors", safetensors_bytes(two), [-1])


def llmc_checkpoint_corpus():
    maxT, V, L, NH, C, Vp = 4, 8, 1, 2, 4, 8
    n = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    w = np.random.default_rng(1).standard_normal(n).astype("<f4") * 0.02
    data = header(20240326, 3, maxT, V, L, NH, C, Vp).tobytes() + w.tobytes()
    with_cuts("llmc_checkpoint", "tiny", data, [-4, 1024, 100])


def llmc_tokens_corpus():
    toks = np.random.default_rng(2).integers(0, 50257, size=64).astype("<u2")
    data = header(20240520, 1, len(toks)).tobytes() + toks.tobytes()
    with_cuts("llmc_tokens", "tokens64", data, [-2, 1024])
    put("llmc_tokens", "zero_count", header(20240520, 1, 0).tobytes())


def checkpoint_corpus(reftrain):
    """Checkpoints of the 1-layer llm.c model above (vocab 8), trained two steps by reftrain."""
    maxT, V, L, NH, C, Vp = 4, 8, 1, 2, 4, 8
    n = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    w = np.random.default_rng(1).standard_normal(n).astype("<f4") * 0.02
    toks = np.random.default_rng(3).integers(0, V, size=200).astype("<u2")
    with tempfile.TemporaryDirectory() as tmp:
        init, data = os.path.join(tmp, "init.bin"), os.path.join(tmp, "toks.bin")
        with open(init, "wb") as f:
            f.write(header(20240326, 3, maxT, V, L, NH, C, Vp).tobytes() + w.tobytes())
        with open(data, "wb") as f:
            f.write(header(20240520, 1, len(toks)).tobytes() + toks.tobytes())
        for optimizer in ["adamw", "adamw8bit"]:
            out = os.path.join(tmp, optimizer)
            subprocess.run([reftrain, "train", "--init-from", init, "--data-tokens", data,
                            "--batch", "1", "--seq", "4", "--steps", "2", "--val-every", "0",
                            "--optimizer", optimizer, "--save-every", "2", "--out", out],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "ckpt-00000002.safetensors"), "rb") as f:
                ckpt = f.read()
            with_cuts("checkpoint", optimizer, ckpt, [-4, 1000])


def trace_corpus(reftrain):
    with tempfile.TemporaryDirectory() as tmp:
        text, trace = os.path.join(tmp, "t.txt"), os.path.join(tmp, "t.jsonl")
        with open(text, "w") as f:
            f.write("the cat sat on the mat. a dog ran in the park.\n" * 40)
        subprocess.run([reftrain, "train", "--preset", "tiny", "--steps", "2", "--val-every",
                        "1", "--data", text, "--trace", trace], check=True,
                       stdout=subprocess.DEVNULL)
        with open(trace, "rb") as f:
            lines = f.read().splitlines(keepends=True)
    put("trace_jsonl", "tiny_run", b"".join(lines))
    put("trace_jsonl", "step_line", lines[2])
    put("trace_jsonl", "cut_line", lines[2][: len(lines[2]) // 2])


def tokenizer_and_hf_corpus(reftrain):
    """A small trained tokenizer (tokenizer.json; vocab.json + NUL + merges.txt as one input) and
    the config.json of exported gpt2 and llama models."""
    with tempfile.TemporaryDirectory() as tmp:
        text, tok = os.path.join(tmp, "t.txt"), os.path.join(tmp, "tok.json")
        with open(text, "w") as f:
            f.write("the cat sat on the mat. a dog ran in the park.\n" * 40)
        subprocess.run([reftrain, "tokenizer", "train", "--data", text, "--vocab-size", "270",
                        "--out", tok], check=True, stderr=subprocess.DEVNULL)
        with open(tok, "rb") as f:
            data = f.read()
        with_cuts("tokenizer_json", "tok270", data, [-2, len(data) // 2])
        for preset in ["tiny", "llama-tiny"]:
            ck, hf = os.path.join(tmp, "ck-" + preset), os.path.join(tmp, "hf-" + preset)
            args = ["--tokenizer", tok] if preset == "tiny" else []
            subprocess.run([reftrain, "train", "--preset", preset, "--steps", "1", "--data", text,
                            "--out", ck] + args, check=True, stdout=subprocess.DEVNULL)
            subprocess.run([reftrain, "export", "--ckpt", ck, "--format", "hf", "--out", hf],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(hf, "config.json"), "rb") as f:
                put("hf_config", preset, f.read())
        with open(os.path.join(tmp, "hf-tiny", "vocab.json"), "rb") as f:
            vocab = f.read()
        with open(os.path.join(tmp, "hf-tiny", "merges.txt"), "rb") as f:
            merges = f.read()
        with_cuts("tokenizer_files", "tok270", vocab + b"\0" + merges, [-3, len(vocab) + 40])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    safetensors_corpus()
    llmc_checkpoint_corpus()
    llmc_tokens_corpus()
    checkpoint_corpus(sys.argv[1])
    trace_corpus(sys.argv[1])
    tokenizer_and_hf_corpus(sys.argv[1])


if __name__ == "__main__":
    main()
