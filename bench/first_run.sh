#!/usr/bin/env bash
# README's first command, measured (bench/RESULTS.md, "Issue 31"): `reftrain train` (with
# FLAGS, on DATA or the default corpus) on 2 threads, its start with and without the tokenizer
# cache, then 5 samples of 300 tokens (seeds 1..5; sample's defaults, then top-p 0.9, as the
# sample that ends `train`) from RUN/best and the share of
# their words that are corpus words: a word is a run of letters and apostrophes, lower-cased;
# a corpus word occurs at least 3 times in the training text (the first 90 %).
#   R=build/reftrain OUT=dir [DATA=file] [FLAGS=...] bench/first_run.sh
set -euo pipefail
R=${R:-build/reftrain}; OUT=${OUT:?a directory}; DATA=${DATA:-}; FLAGS=${FLAGS:-}
mkdir -p "$OUT"
data=${DATA:+--data $DATA}
start() {  # the wall time of a 1-step run: loading, tokenizer, encoding, one step
  local t0 t1; t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  $R train $data "$@" --steps 1 --val-batches 1 --threads 2 > /dev/null
  t1=$(date +%s.%N); python3 -c "print(f'{$t1 - $t0:.2f} s')"
}
[ -z "$DATA" ] && rm -f "${XDG_CACHE_HOME:-$HOME/.cache}"/reftrain/fortunes.auto*
echo "start, bytes: $(start --tokenizer bytes)"
echo "start, auto, first run (trains the tokenizer): $(start)"
echo "start, auto, cached: $(start)"
t0=$(date +%s.%N)
# shellcheck disable=SC2086
$R train $data $FLAGS --threads 2 --trace "$OUT/run.jsonl" --out "$OUT/run" > "$OUT/train.log" 2>&1
t1=$(date +%s.%N)
grep -E "^tokenizer|^val|^done" "$OUT/train.log"
python3 -c "print(f'whole command: {$t1 - $t0:.1f} s')"
ratio() {  # 5 samples of 300 tokens with the sample flags $1, and their corpus words
  for s in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    $R sample --ckpt "$OUT/run/best" --seed $s --tokens 300 --threads 2 $1 \
      > "$OUT/sample$s.txt" 2> /dev/null
  done
  echo "sample $1:"
  python3 - "$OUT" "${DATA:-/usr/share/games/fortunes}" <<'PY'
import collections, os, re, sys
out, data = sys.argv[1], sys.argv[2]
if os.path.isdir(data):  # the fortunes corpus as reftrain reads it
    text = b''
    for name in sorted(os.listdir(data)):
        p = os.path.join(data, name)
        if os.path.islink(p) or not os.path.isfile(p) or name.endswith('.dat'): continue
        text += b''.join(l + b'\n' for l in open(p, 'rb').read().splitlines() if l != b'%')
else:
    text = open(data, 'rb').read()
train = text[:len(text) * 9 // 10].decode('utf-8', 'replace')
words = lambda s: re.findall(r"[a-z']+", s.lower())
count = collections.Counter(words(train))
ratios = []
for s in range(1, 6):
    w = words(open(f'{out}/sample{s}.txt', encoding='utf-8', errors='replace').read())
    ratios.append(sum(count[x] >= 3 for x in w) / max(1, len(w)))
    print(f'seed {s}: {len(w)} words, {100 * ratios[-1]:.1f} % corpus words')
print(f'mean: {100 * sum(ratios) / len(ratios):.1f} % corpus words')
PY
}
ratio ""
ratio "--top-p 0.9"
