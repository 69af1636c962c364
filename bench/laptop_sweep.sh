#!/usr/bin/env bash
# The sweeps behind `laptop` and `--tokenizer auto` (bench/RESULTS.md, "Issue 31"): every run
# trains on 2 threads for the same wall time, BUDGET seconds of steps (a pilot of each config
# measures its ms/step, in the same conditions, and the run gets BUDGET / that steps), and is
# ranked by its validation bits per byte (VAL_TOKENS tokens of the val split, the trace's
# val_bpb at the last step). PAR runs go side by side (2 threads each).
#
#   MODE=recipe  the laptop recipe: shape, context, batch, lr on fortunes with --tokenizer auto
#   MODE=vocab   the auto rule: text size (the first N bytes of DATA, SIZES; 0 = all) × BPE
#                vocabulary size (VOCABS), with the flags EXTRA over the laptop preset
#
#   R=build/reftrain DATA=fortunes.txt OUT=dir MODE=recipe bench/laptop_sweep.sh
# Prints one table row per run: config, steps, ms/step, train s, val loss, val bits per byte.
set -euo pipefail
R=${R:-build/reftrain}; DATA=${DATA:?a text file}; OUT=${OUT:?a directory for the traces}
MODE=${MODE:-recipe}; BUDGET=${BUDGET:-80}; PAR=${PAR:-7}; VAL_TOKENS=${VAL_TOKENS:-61440}
PILOT=${PILOT:-30}
mkdir -p "$OUT"

# name|flags (the flags over `--preset laptop`; B and T are read back from the flags for
# the validation size).
recipe_configs() {
  local s="--layers 4 --heads 4 --channels 128"
  echo "L4C128-T64-B12-lr1e-3|$s --seq 64 --batch 12 --lr 1e-3 --min-lr 1e-4"
  echo "L4C128-T64-B12-lr2e-3|$s --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4"
  echo "L4C128-T64-B12-lr3e-3|$s --seq 64 --batch 12 --lr 3e-3 --min-lr 3e-4"
  echo "L4C128-T64-B24-lr2e-3|$s --seq 64 --batch 24 --lr 2e-3 --min-lr 2e-4"
  echo "L4C128-T128-B12-lr2e-3|$s --max-seq 128 --seq 128 --batch 12 --lr 2e-3 --min-lr 2e-4"
  echo "L4C128-T32-B24-lr2e-3|$s --seq 32 --batch 24 --lr 2e-3 --min-lr 2e-4"
  echo "L2C128-T64-B12-lr2e-3|--layers 2 --heads 4 --channels 128 --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4"
  echo "L6C128-T64-B12-lr2e-3|--layers 6 --heads 4 --channels 128 --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4"
  echo "L4C192-T64-B12-lr2e-3|--layers 4 --heads 6 --channels 192 --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4"
  echo "L3C256-T64-B12-lr1e-3|--layers 3 --heads 4 --channels 256 --seq 64 --batch 12 --lr 1e-3 --min-lr 1e-4"
  echo "L4C96-T64-B16-lr3e-3|--layers 4 --heads 4 --channels 96 --seq 64 --batch 16 --lr 3e-3 --min-lr 3e-4"
  echo "L4C128-T64-B12-lr2e-3-w20|$s --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4 --warmup 20"
  echo "L4C128-T64-B12-lr2e-3-wd0|$s --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4 --wd 0"
  echo "L4C128-T64-B12-lr2e-3-const|$s --seq 64 --batch 12 --lr 2e-3 --min-lr 2e-4 --schedule constant"
}

# The first SIZE bytes of DATA, and a BPE of V tokens trained on their first 90 % (the
# training split, as --tokenizer auto trains it); V 256 is bytes.
vocab_configs() {
  local size v
  for size in ${SIZES:-131072 524288 0}; do
    local text=$OUT/text-$size.txt
    if [ "$size" = 0 ]; then cp "$DATA" "$text"; else head -c "$size" "$DATA" > "$text"; fi
    local n; n=$(stat -c %s "$text")
    head -c $((n * 9 / 10)) "$text" > "$OUT/train90-$size.txt"
    for v in ${VOCABS:-256 512 1024 2048 4096 8192}; do
      local tok=bytes
      if [ "$v" != 256 ]; then
        tok=$OUT/tok-$size-$v.json
        $R tokenizer train --data "$OUT/train90-$size.txt" --vocab-size "$v" --out "$tok" > /dev/null
      fi
      echo "size$n-V$v|--data $text --tokenizer $tok ${EXTRA:-}"
    done
  done
}

flag() { echo "$2" | sed -n "s/.*$1 \([0-9]*\).*/\1/p"; }

# ms/step of a trace: the median of steps 6.. (the first ones warm caches).
ms() {
  python3 -c "import json,sys,statistics as s; print(s.median([j['ms'] for j in map(json.loads, open(sys.argv[1])) if j.get('type')=='step' and j['step']>5]))" "$1"
}

# Runs "name|flags" lines, PAR at a time: phase pilot or full.
run_all() {
  local phase=$1; shift
  local line name flags n=0
  while IFS= read -r line; do
    name=${line%%|*}; flags=${line#*|}
    local extra data=""
    [ "$MODE" = recipe ] && data="--data $DATA"
    if [ "$phase" = pilot ]; then
      extra="--steps $PILOT --val-batches 1"
    else
      local b t steps
      b=$(flag --batch "$flags"); b=${b:-12}; t=$(flag --seq "$flags"); t=${t:-64}
      steps=$(python3 -c "print(max(1, int($BUDGET * 1000 / $(ms "$OUT/$name.pilot.jsonl"))))")
      extra="--steps $steps --val-every 0 --val-batches $((VAL_TOKENS / (b * t)))"
    fi
    # shellcheck disable=SC2086
    $R train $data $flags $extra --threads 2 --trace "$OUT/$name.$phase.jsonl" \
      > "$OUT/$name.$phase.log" 2>&1 &
    n=$((n + 1))
    if [ $((n % PAR)) = 0 ]; then wait; fi
  done
  wait
}

configs=$( [ "$MODE" = recipe ] && recipe_configs || vocab_configs )
# The tokenizer (auto) is trained and the ids cached once, before runs read them side by side.
[ "$MODE" = recipe ] && $R train --data "$DATA" --steps 1 --val-batches 1 > /dev/null
echo "$configs" | run_all pilot
echo "$configs" | run_all full
echo "| config | steps | ms/step | train s | val loss (nats/token) | val bits/byte |"
echo "|---|---:|---:|---:|---:|---:|"
echo "$configs" | while IFS= read -r line; do
  name=${line%%|*}
  python3 - "$OUT/$name.full.jsonl" "$name" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [l for l in lines if l.get('type') == 'step']
val = [l for l in lines if l.get('type') == 'val'][-1]
ms = statistics.median(l['ms'] for l in steps[5:]) if len(steps) > 5 else steps[-1]['ms']
secs = sum(l['ms'] for l in steps) / 1000
print(f"| {sys.argv[2]} | {len(steps)} | {ms:.1f} | {secs:.1f} | {val['val_loss']:.4f} | "
      f"{val.get('val_bpb', float('nan')):.3f} |")
PY
done
