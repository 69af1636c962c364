#!/usr/bin/env bash
# Every benchmark of issue 5 in one run, and a summary table:
#   1. the FMA peak (bench_peak) and the per-kernel benches (bench_matmul, bench_attention; each
#      skipped with a note where it is not built), at each thread count;
#   2. a whole training step of each preset: reftrain as built, the same build with the
#      reference kernels (`--matmul naive --attention materialised`; skipped with a note where
#      the binary does not know the flags), and PyTorch on the identical model and batch
#      (bench/torch_step.py, stock and tuned), at each thread count: ms/step (median of steps
#      2..STEPS), tokens/s, model FLOP/s and % of the measured peak (the FLOP formula is in
#      bench/step_report.py and bench/RESULTS.md), each run's time ÷ reftrain's;
#   3. thread scaling: ms at the fewest threads ÷ ms at each other count.
# With REPEATS=n each (preset, threads) pair runs reftrain and PyTorch alternately n times and
# the table reports the median of the n runs (and lists them): on a shared or virtual machine
# one run of each is not enough.
#
# Usage: bench/run_all.sh            (from anywhere; settings through the environment)
#   BUILD=build                      the cmake build dir (reftrain, bench/bench_*)
#   THREADS="1 $(nproc)"             thread counts
#   STEPS=11                         training steps per run; the median skips step 1
#   REPEATS=1                        runs of each (reftrain and PyTorch alternately)
#   VARIANT_STEPS=4                  steps of the variants other than "default" (the reference
#                                    kernels are slow by design: 3 timed steps are enough)
#   PRESETS="laptop baby llama-small gpt2-124m"
#                                    baby and llama-small run at --batch 8, gpt2-124m at
#                                    --batch 4 --seq $GPT2_SEQ on random GPT-2 token ids (an
#                                    llm.c token file written once into OUT), the rest as preset
#   GPT2_SEQ=64                      gpt2-124m's T (1024: its full context)
#   VARIANTS="default;--matmul naive --attention materialised"
#                                    reftrain flag sets, ';'-separated ("default" = no flags)
#   TORCH_MODES="stock tuned"        bench/torch_step.py --mode values ("" = no PyTorch;
#                                    autocast: stock under bf16 autocast)
#   PYTHON                           python with torch (default: /usr/bin/python3 if it has
#                                    torch, else python3)
#   DATA                             text file for the byte-level presets (default: reftrain's
#                                    own, the Debian fortunes corpus)
#   KERNEL_BENCHES="bench_matmul bench_attention"   BENCH_ARGS=   (extra Google Benchmark flags)
#   BUSY=0                           other programs keeping cores busy during the training
#                                    steps: BUSY shell loops, each enough to fill one core,
#                                    stopped at exit (a laptop with a browser open; placed by
#                                    the OS scheduler, not pinned)
#   OUT=runs/bench-DATE              where traces, logs and summary.md go
# Example, the GPU machine's 16-core CPU (no apt there, so the tuned mode reports unavailable):
#   DATA=.deps/fortunes.txt PYTHON=python3 THREADS="1 2 16" bench/run_all.sh
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$repo/build}
THREADS=${THREADS:-"1 $(nproc)"}
STEPS=${STEPS:-11}
REPEATS=${REPEATS:-1}
GPT2_SEQ=${GPT2_SEQ:-64}
VARIANT_STEPS=${VARIANT_STEPS:-4}
PRESETS=${PRESETS:-"laptop baby llama-small gpt2-124m"}
VARIANTS=${VARIANTS:-"default;--matmul naive --attention materialised"}
TORCH_MODES=${TORCH_MODES-"stock tuned"}
KERNEL_BENCHES=${KERNEL_BENCHES-"bench_matmul bench_attention"}
BENCH_ARGS=${BENCH_ARGS:-}
DATA=${DATA:-}
OUT=${OUT:-$repo/runs/bench-$(date +%Y%m%d-%H%M%S)}
BUSY=${BUSY:-0}
GPT2_VOCAB=50257 # GPT-2's tokenizer; gpt2-124m's token file draws ids below it

die() {
  echo "error: $*" >&2
  exit 2
}
note() { echo "run_all: $*" >&2; }

pick_python() {
  if [[ -n ${PYTHON:-} ]]; then
    echo "$PYTHON"
  elif /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo /usr/bin/python3
  else
    echo python3
  fi
}
PYTHON=$(pick_python)
reftrain=$BUILD/reftrain
[[ -x $reftrain ]] || die "$reftrain not found; build first (cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build) or set BUILD=dir"
"$PYTHON" -c 'import sys' 2>/dev/null || die "PYTHON=$PYTHON does not run; set PYTHON to a python3"
[[ $REPEATS =~ ^[1-9][0-9]*$ ]] || die "REPEATS=$REPEATS: need a whole number >= 1"
[[ $GPT2_SEQ =~ ^[1-9][0-9]*$ ]] || die "GPT2_SEQ=$GPT2_SEQ: need a whole number >= 1"
[[ $BUSY =~ ^[0-9]+$ ]] || die "BUSY=$BUSY: need a whole number of busy loops >= 0"
for setting in "STEPS=$STEPS" "VARIANT_STEPS=$VARIANT_STEPS"; do
  [[ ${setting#*=} =~ ^[0-9]+$ && ${setting#*=} -ge 2 ]] || die "$setting: need a whole number >= 2 (the median skips step 1)"
done
for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "THREADS=\"$THREADS\": '$t' is not a thread count"; done
[[ -z $DATA || -f $DATA ]] || die "DATA=$DATA is not a file; pass a UTF-8 text file or leave DATA unset"
torch_version=none
if [[ -n $TORCH_MODES ]]; then
  torch_version=$("$PYTHON" -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    die "$PYTHON cannot import torch; set PYTHON to a python3 with torch, or TORCH_MODES= to skip PyTorch"
fi
mkdir -p "$OUT/logs" "$OUT/traces"
results=$OUT/steps.jsonl
: >"$results"
report() { "$PYTHON" "$repo/bench/step_report.py" "$@"; }
failures=0

# --- 1. the peak and the per-kernel benches -------------------------------------------------
declare -A peak
measure_peak() {
  local bin=$BUILD/bench/bench_peak t
  if [[ ! -x $bin ]]; then
    note "skip: $bin not built, so '% of peak' reads n/a"
    return
  fi
  for t in $THREADS; do
    OMP_NUM_THREADS=$t "$bin" --benchmark_out="$OUT/logs/peak_t$t.json" \
      --benchmark_out_format=json >"$OUT/logs/peak_t$t.txt" 2>&1
    peak[$t]=$(report peak "$OUT/logs/peak_t$t.json")
    note "peak at $t threads: $(awk -v f="${peak[$t]}" -v t="$t" 'BEGIN{printf "%.1f GFLOP/s (%.1f per core)", f/1e9, f/1e9/t}')"
  done
}

kernel_benches() {
  local b t
  for b in $KERNEL_BENCHES; do
    if [[ ! -x $BUILD/bench/$b ]]; then
      note "skip: $BUILD/bench/$b not built (not on this branch yet)"
      continue
    fi
    for t in $THREADS; do
      echo "== $b, $t threads"
      # shellcheck disable=SC2086  # BENCH_ARGS is a list of flags
      OMP_NUM_THREADS=$t "$BUILD/bench/$b" $BENCH_ARGS | tee "$OUT/logs/${b}_t$t.txt"
    done
  done
}

# --- 2. training steps ------------------------------------------------------------------------
# gpt2-124m's data: random ids below GPT-2's vocab in llm.c's token-file format, written once.
gpt2_tokens() {
  local f=$OUT/gpt2_random_tokens.bin
  [[ -f $f ]] || "$PYTHON" "$repo/tests/torch/llmc_files.py" tokens "$f" --count 1000000 \
    --vocab "$GPT2_VOCAB" --seed 1
  echo "$f"
}

# The flags that make a preset the benchmark's shape, and its data.
preset_args() {
  case $1 in
    baby | llama-small) echo "--batch 8 ${DATA:+--data $DATA}" ;;
    gpt2-124m) echo "--batch 4 --seq $GPT2_SEQ --data-tokens $(gpt2_tokens)" ;;
    *) echo "${DATA:+--data $DATA}" ;;
  esac
}

# One JSON line into $results (bench/step_report.py record), and its ms/step on the console.
record() {
  local line
  line=$(report record --preset "$preset" --threads "$t" --peak "${peak[$t]:-0}" --repeat "$rep" "$@")
  echo "$line" >>"$results"
  [[ $line == *'"skipped"'* ]] || note "  $("$PYTHON" -c 'import json, sys
r = json.loads(sys.argv[1])
print("%s: %.1f ms/step" % (r["run"], r["ms"]))' "$line")"
}

# reftrain with one flag set. Exit status 2 (a usage error) with extra flags means this build
# does not have them: skipped. Any other failure is recorded and fails the whole run at the end.
run_reftrain() {
  local flags=$1 label=reftrain slug=default steps=$STEPS
  if [[ $flags != default ]]; then
    label="reftrain $flags"
    steps=$VARIANT_STEPS
    slug=$(echo "$flags" | tr -c 'a-zA-Z0-9\n' '_')
  else
    flags=
  fi
  local run=${preset}_t${t}_r${rep}_$slug
  local trace=$OUT/traces/$run.jsonl err=$OUT/logs/$run.err rc=0
  # One validation batch at the end: it is not timed, and the preset's 20 took longer than the
  # steps that are (baby at B8: 12 s against 6 steps' 6 s on two Zen 4 cores).
  # shellcheck disable=SC2046,SC2086  # word splitting wanted: preset_args and flags are flag lists
  "$reftrain" train --preset "$preset" $(preset_args "$preset") --steps "$steps" --threads "$t" \
    --val-every 0 --val-batches 1 --trace "$trace" $flags >"$OUT/logs/$run.log" 2>"$err" || rc=$?
  if [[ $rc == 0 ]]; then
    record --trace "$trace" --run "$label"
    [[ -n $model_trace ]] || model_trace=$trace
  elif [[ $rc == 2 && -n $flags ]]; then
    note "skip: this reftrain rejects '$flags': $(tail -n1 "$err")"
    [[ -z $model_trace ]] || record --trace "$model_trace" --run "$label" --skipped "flags not in this build"
  else
    note "FAILED ($rc): $label on $preset, $t threads: $(tail -n1 "$err")"
    failures=$((failures + 1))
  fi
}

# PyTorch on the model and batch of the first reftrain trace of this preset.
run_torch() {
  local mode=$1
  local json=$OUT/logs/${preset}_t${t}_r${rep}_torch_$mode.json
  local err=$OUT/logs/${preset}_t${t}_r${rep}_torch_$mode.err
  local label="PyTorch $torch_version $mode" rc=0
  if [[ -z $model_trace ]]; then
    note "skip: $label on $preset: no reftrain trace to take the model from"
    return
  fi
  "$PYTHON" "$repo/bench/torch_step.py" "$model_trace" --threads "$t" --steps "$STEPS" \
    --mode "$mode" >"$json" 2>"$err" || rc=$?
  if [[ $rc == 0 ]]; then
    record --trace "$model_trace" --run "$label" --torch-json "$json"
  elif [[ $rc == 3 ]]; then
    note "skip: $label: $(tail -n1 "$err")"
    record --trace "$model_trace" --run "$label" --skipped "unavailable here (see $err)"
  else
    note "FAILED ($rc): $label on $preset, $t threads: $(tail -n1 "$err")"
    failures=$((failures + 1))
  fi
}

training_steps() {
  local v mode variants
  IFS=';' read -ra variants <<<"$VARIANTS"
  for preset in $PRESETS; do
    model_trace=
    [[ $preset != gpt2-124m ]] || gpt2_tokens >/dev/null
    for t in $THREADS; do
      for rep in $(seq "$REPEATS"); do
        note "$preset, $t threads, run $rep of $REPEATS"
        for v in "${variants[@]}"; do run_reftrain "$v"; done
        for mode in $TORCH_MODES; do run_torch "$mode"; done
      done
    done
  done
}

# --- 3. the summary ---------------------------------------------------------------------------
machine() {
  local cpu
  cpu=$({ lscpu 2>/dev/null || true; } | sed -n 's/^Model name: *//p' | head -n1)
  echo "machine: ${cpu:-unknown CPU}, $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown); build: $BUILD; PyTorch $torch_version ($PYTHON)"
  echo "OpenMP placement (reftrain and PyTorch alike): OMP_PROC_BIND=${OMP_PROC_BIND:-unset} OMP_PLACES=${OMP_PLACES:-unset}"
  echo "busy loops beside the training steps (BUSY): $BUSY"
  echo "load average (1, 5, 15 min) at the start: $load_start; at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: BUSY=$BUSY THREADS=\"$THREADS\" STEPS=$STEPS REPEATS=$REPEATS GPT2_SEQ=$GPT2_SEQ VARIANT_STEPS=$VARIANT_STEPS PRESETS=\"$PRESETS\" VARIANTS=\"$VARIANTS\" TORCH_MODES=\"$TORCH_MODES\"${DATA:+ DATA=$DATA} bench/run_all.sh"
}

summary() {
  local t
  machine
  echo
  echo "| threads | FMA peak GFLOP/s | per core |"
  echo "|---:|---:|---:|"
  for t in $THREADS; do
    if [[ -n ${peak[$t]:-} ]]; then
      awk -v f="${peak[$t]}" -v t="$t" 'BEGIN{printf "| %d | %.1f | %.1f |\n", t, f/1e9, f/1e9/t}'
    else
      echo "| $t | n/a | n/a |"
    fi
  done
  echo
  report table "$results"
}

# BUSY loops run only while the training steps do; the trap stops them however the script ends.
busy_pids=()
stop_busy() {
  if ((${#busy_pids[@]} > 0)); then kill "${busy_pids[@]}" 2>/dev/null || true; fi
  busy_pids=()
}
trap stop_busy EXIT
trap 'exit 130' INT TERM

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
measure_peak
kernel_benches
for ((i = 0; i < BUSY; i++)); do
  (while :; do :; done) &
  busy_pids+=($!)
done
training_steps
stop_busy
summary | tee "$OUT/summary.md"
note "traces, logs and summary.md in $OUT"
if ((failures > 0)); then
  echo "error: $failures run(s) failed; their logs are in $OUT/logs" >&2
  exit 1
fi
