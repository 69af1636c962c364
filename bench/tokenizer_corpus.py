#!/usr/bin/python3
"""Writes the tokenizer benchmark's corpus: the fortunes files (name order), then the text files
of /usr/share/doc (*.txt, README*, *.md; path order) that are valid UTF-8, cut to SIZE bytes at a
character boundary. Usage: bench/tokenizer_corpus.py OUT [SIZE, default 10000000]"""
import os
import sys

out, size = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
fortunes = "/usr/share/games/fortunes"
paths = [os.path.join(fortunes, f) for f in sorted(os.listdir(fortunes))
         if not f.endswith((".dat", ".u8")) and not os.path.islink(os.path.join(fortunes, f))]
docs = []
for root, _, files in os.walk("/usr/share/doc"):
    for f in files:
        if f.endswith((".txt", ".md")) or f.startswith("README"):
            p = os.path.join(root, f)
            if os.path.isfile(p) and not os.path.islink(p) and not f.endswith(".gz"):
                docs.append(p)
text = []
total = 0
for p in paths + sorted(docs):
    with open(p, "rb") as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        continue
    text.append(data)
    total += len(data)
    if total >= size:
        break
blob = b"".join(text)[:size]
blob = blob.decode("utf-8", "ignore").encode("utf-8")  # a character cut at the end
with open(out, "wb") as fh:
    fh.write(blob)
print(f"{out}: {len(blob)} bytes from {len(text)} files")
