#!/usr/bin/env bash
# The tokenizer's figures in bench/RESULTS.md: BPE training time and bytes/token on the
# fortunes corpus (vocab 1024, 4096, 16384) and on a 10 MB corpus (bench/tokenizer_corpus.py;
# vocab 4096, 1 and 2 threads), and GPT-2 encoding throughput of reftrain against
# gpt-3-encoder and js-tiktoken (tests/tokenizer/oracle.mjs bench) on the same 10 MB.
# Usage: bench/tokenizer_bench.sh [BUILD_DIR, default build]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$repo/${1:-build}/reftrain"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
"$repo/bench/tokenizer_corpus.py" "$work/corpus10m.txt"
for vocab in 1024 4096 16384; do
  "$bin" tokenizer train --vocab-size "$vocab" --out "$work/fortunes-$vocab.json"
done
for threads in 1 2; do
  OMP_NUM_THREADS=$threads "$bin" tokenizer train --data "$work/corpus10m.txt" --vocab-size 4096 \
    --out "$work/c10-$threads.json"
done
cmp "$work/c10-1.json" "$work/c10-2.json" && echo "1 and 2 threads: the same file"

: >"$work/empty.txt"
t0=$(now); "$bin" tokenizer encode --tokenizer gpt2 "$work/empty.txt" >/dev/null; t1=$(now)
"$bin" tokenizer encode --tokenizer gpt2 "$work/corpus10m.txt" >"$work/ids.txt"; t2=$(now)
tokens=$(wc -w <"$work/ids.txt")
echo "reftrain gpt2 encode: $(echo "$t2 - $t1" | bc) s for 10000000 bytes ($tokens tokens;" \
     "loading the vocab alone: $(echo "$t1 - $t0" | bc) s)"
node "$repo/tests/tokenizer/oracle.mjs" bench "$work/corpus10m.txt"
