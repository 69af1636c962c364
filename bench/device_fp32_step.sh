#!/usr/bin/env bash
# Issue 32's figures on a machine without reftrain's build dependencies installed (the 16-core
# Xeon of bench/RESULTS.md), with them unpacked under .deps/device/root/usr (bench/device_deps.sh):
# builds reftrain and bench_peak into /tmp/bf, then runs bench/run_all.sh there: the FMA peak and
# whole fp32 steps of reftrain against PyTorch (stock), alternating, REPEATS times per preset and
# thread count, with each step's % of the peak; then reftrain's `--profile` beside
# bench/torch_step.py's `--profile` (torch.profiler) on the same step, at PROFILE_THREADS.
# $OUT gets the summary (summary.md) and the profiles, a few files, since the machine returns few;
# run_all.sh's traces and logs stay in /tmp/device-fp32-steps.
#   PRESETS=baby THREADS="1 2 16" PROFILE_THREADS="1 2" bash bench/device_fp32_step.sh
#   (and the same for llama-small)
# One preset a call: with run_all.sh's single validation batch a run is its steps and start-up,
# and one preset at 1, 2 and 16 threads with REPEATS=5 fits a device call's 10 minutes (baby took
# 6 on the Xeon, build included; with the preset's 20 validation batches, one preset at 1 and 2
# threads took 11-12 on a Zen 4). The build in /tmp/bf is kept between calls while the machine
# stays up, and rebuilt where the tree changed.
set -euo pipefail
P=$PWD/.deps/device/root/usr
OUT=${OUT:-$PWD/runs/device-fp32-$(date +%Y%m%d-%H%M%S)}
B=/tmp/bf
mkdir -p "$OUT" $B/bench
export LIBRARY_PATH=$P/lib/x86_64-linux-gnu LD_LIBRARY_PATH=$P/lib/x86_64-linux-gnu
PRESETS=${PRESETS:-baby llama-small}
if [[ ! -f $B/build.ninja ]]; then
  cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$P" \
    -DREFTRAIN_BUILD_TESTS=OFF -DREFTRAIN_BUILD_BENCH=OFF >"$OUT/cmake.log" ||
    { tail -20 "$OUT/cmake.log"; exit 1; }
fi
# Every call: a later call with a changed tree times that tree, not the first call's build.
cmake --build $B -j"$(nproc)" --target reftrain >"$OUT/build.log" ||
  { tail -40 "$OUT/build.log"; exit 1; }
# bench_peak alone, with the build's flags for this machine: bench/CMakeLists.txt would also
# want OpenBLAS, the AVX2 peer of bench_matmul, which this machine does not need.
[[ -x $B/bench/bench_peak ]] || g++ -std=c++17 -O3 -march=native -fopenmp -I. -I"$P/include" \
  bench/bench_peak.cpp -L"$P/lib/x86_64-linux-gnu" -lbenchmark -lpthread -o $B/bench/bench_peak
# reftrain's default corpus, where it reads it (run_all.sh passes no --data).
if [[ ! -d /usr/share/games/fortunes ]]; then
  mkdir -p /usr/share/games && cp -r "$P/share/games/fortunes" /usr/share/games/
fi
export OMP_PROC_BIND=close OMP_PLACES=cores
BUILD=$B OUT=/tmp/device-fp32-steps PYTHON=python3 KERNEL_BENCHES='' VARIANTS=default \
  TORCH_MODES=stock PRESETS="$PRESETS" THREADS="${THREADS:-1 2 16}" \
  REPEATS=${REPEATS:-5} STEPS=${STEPS:-6} bash bench/run_all.sh
cp /tmp/device-fp32-steps/summary.md "$OUT/"
for preset in $PRESETS; do
  for t in ${PROFILE_THREADS:-1 2}; do
    $B/reftrain train --preset "$preset" --batch 8 --steps 6 --threads "$t" \
      --val-every 0 --val-batches 1 --trace /tmp/profiled.jsonl --profile \
      >"$OUT/profile_${preset}_t$t.txt" 2>&1
    python3 bench/torch_step.py /tmp/profiled.jsonl --threads "$t" --steps 6 \
      --profile "$OUT/torch_profile_${preset}_t$t.txt" >/dev/null
  done
done
# The profiles' heads on stdout too (run_all.sh has printed the summary): a machine that returns
# few files still shows them.
for f in "$OUT"/profile_*.txt "$OUT"/torch_profile_*.txt; do
  echo "== $f"
  grep -a -A22 -m1 '^profile\|^torch.profiler' "$f"
done
