#!/usr/bin/env bash
# Training-step time of reftrain and of PyTorch on the same model, same CPU, same run.
# Usage: bench/step_bench.sh BUILD_DIR PRESET THREADS [STEPS]
# Prints the median ms/step of steps 2..STEPS for each, and their ratio.
# Environment: PYTHON (default /usr/bin/python3, Debian's, which has torch) and DATA (a text
# file to train on instead of the default fortunes corpus).
set -euo pipefail
build=$1 preset=$2 threads=$3 steps=${4:-11}
py=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
trace=$(mktemp --suffix=.jsonl)
"$build/reftrain" train --preset "$preset" --steps "$steps" --threads "$threads" --val-every 0 \
  ${DATA:+--data "$DATA"} --trace "$trace" > /dev/null
ours=$("$py" -c '
import json, statistics, sys
ms = [json.loads(l)["ms"] for l in open(sys.argv[1]) if "\"type\":\"step\"" in l]
print(statistics.median(ms[1:]))' "$trace")
theirs=$("$py" "$here/torch_step.py" "$trace" --threads "$threads" --steps "$steps")
torch_ms=$(echo "$theirs" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["median_ms"])')
torch_v=$(echo "$theirs" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["torch"])')
rm -f "$trace"
"$py" -c 'import sys; p,t,o,tm,tv=sys.argv[1:]; print(f"{p} threads={t}: reftrain {float(o):.1f} ms/step, torch {tv} {float(tm):.1f} ms/step, torch/reftrain = {float(tm)/float(o):.2f}x")' \
  "$preset" "$threads" "$ours" "$torch_ms" "$torch_v"
