#!/usr/bin/env bash
# Text generation with and without the KV cache (core/train/sample.h): tokens/s of `reftrain
# sample` for each preset, the cached path against the recompute path (--no-kv-cache, a forward
# over the whole window per token) measured in the same run, interleaved; and the cached path
# with the products in bf16 (--precision bf16) against fp32's, in the same loop.
#
# Each preset's checkpoint comes from a one-step `reftrain train --steps 1 --batch 4` (the speed
# does not depend on how trained the weights are, nor on the training batch). Each run generates TOKENS tokens after the default
# prompt (one newline) at temperature 1 with the run's seed; the figure is the median over
# REPEATS runs of the tokens/s line `reftrain sample` writes to stderr. With TOKENS larger than
# the preset's window T the cached path slides its window (sample.h) about 2·TOKENS/T times.
#
# Usage: bench/sample_speed.sh       (from anywhere; settings through the environment)
#   BUILD=build            the cmake build dir holding reftrain
#   PRESETS="laptop baby"  presets to measure
#   TOKENS=500             generated tokens per run
#   REPEATS=3              runs of each path per preset (median)
#   THREADS=$(nproc)       OpenMP threads
#   OUT=$(mktemp -d)       where the checkpoints go (kept)
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$here/$BUILD ;; esac
PRESETS=${PRESETS:-laptop baby}
TOKENS=${TOKENS:-500}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-$(nproc)}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
bin=$BUILD/reftrain
[[ -x $bin ]] || { echo "no $bin: build it first (cmake --build $BUILD --target reftrain)" >&2; exit 1; }

# tokens/s of one `reftrain sample` run (its last stderr line: "... : N tokens/s (path)").
rate() {
  "$bin" sample --ckpt "$1" --tokens "$TOKENS" --threads "$THREADS" "${@:2}" 2>&1 >/dev/null |
    sed -n 's/.*: \([0-9.]*\) tokens\/s.*/\1/p' | tail -1
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "reftrain sample, $TOKENS tokens, $THREADS threads, median of $REPEATS; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores"
echo
echo "| preset | window T | KV cache tokens/s | recompute tokens/s | speed-up | bf16 KV cache tokens/s | bf16 ÷ fp32 |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for preset in $PRESETS; do
  ckpt=$OUT/$preset
  if [[ ! -e $ckpt ]]; then
    # --batch 4: a quick step; the window (the preset's T) is what sampling depends on.
    "$bin" train --preset "$preset" --steps 1 --batch 4 --val-every 0 --val-batches 1 --threads "$THREADS" \
      --out "$ckpt" >"$OUT/$preset.train.log" 2>&1 ||
      { echo "train --preset $preset failed: $OUT/$preset.train.log" >&2; exit 1; }
  fi
  kv=() re=() bf=()
  for ((r = 0; r < REPEATS; ++r)); do
    kv+=("$(rate "$ckpt" --precision fp32)")
    re+=("$(rate "$ckpt" --precision fp32 --no-kv-cache)")
    bf+=("$(rate "$ckpt" --precision bf16)")
  done
  k=$(median "${kv[@]}") c=$(median "${re[@]}") b=$(median "${bf[@]}")
  window=$("$bin" presets | awk -v p="$preset" '$1 == p {print $10}')  # the T column
  printf '| %s | %s | %.1f | %.1f | %.1f× | %.1f | %.2f× |\n' "$preset" "${window:-?}" "$k" "$c" \
    "$(awk -v a="$k" -v b="$c" 'BEGIN {print a / b}')" "$b" "$(awk -v a="$b" -v f="$k" 'BEGIN {print a / f}')"
done
