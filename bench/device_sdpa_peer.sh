#!/usr/bin/env bash
# Issue 32's fair peer at long T, on a machine without the build dependencies installed (they
# are unpacked under .deps/device/root/usr): gpt2-124m B4 T1024, reftrain fp32 (its fused
# attention) against PyTorch fp32 with the materialised attention and with
# scaled_dot_product_attention (bench/torch_step.py --attention), alternating, ROUNDS rounds.
set -uo pipefail
P=$PWD/.deps/device/root/usr
export LIBRARY_PATH=$P/lib/x86_64-linux-gnu
if [ ! -x /tmp/bg/reftrain ]; then
  cmake -S . -B /tmp/bg -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$P -DREFTRAIN_TORCH_TESTS=OFF -DREFTRAIN_NESTED_TESTS=OFF -DREFTRAIN_BUILD_TESTS=OFF -DREFTRAIN_BUILD_BENCH=OFF > $OUT/cmake.log 2>&1
fi
cmake --build /tmp/bg -j16 --target reftrain > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
R=/tmp/bg/reftrain
python3 tests/torch/llmc_files.py tokens /tmp/tok.bin --count 1000000 --vocab 50257 --seed 1 > /dev/null || exit 1
export OMP_PROC_BIND=close OMP_PLACES=cores
med() { python3 -c "
import json,statistics
ms=[json.loads(l)['ms'] for l in open('$1') if json.loads(l).get('type')=='step' and json.loads(l)['step']>=2]
print(round(statistics.median(ms),1))"; }
for th in ${THREADS:-16 2}; do
  for r in $(seq ${ROUNDS:-3}); do
    $R train --preset gpt2-124m --batch 4 --seq 1024 --steps ${STEPS:-4} --threads $th --data-tokens /tmp/tok.bin --trace /tmp/g.jsonl --val-batches 1 --val-every 0 > /dev/null 2>&1 || echo fail
    a=$(med /tmp/g.jsonl)
    m=$(python3 bench/torch_step.py /tmp/g.jsonl --threads $th --steps ${STEPS:-4} 2>&1 | python3 -c "import json,sys; print(round(json.loads(sys.stdin.read())['median_ms'],1))")
    s=$(python3 bench/torch_step.py /tmp/g.jsonl --threads $th --steps ${STEPS:-4} --attention sdpa 2>&1 | python3 -c "import json,sys; print(round(json.loads(sys.stdin.read())['median_ms'],1))")
    echo "threads $th round $r: reftrain fp32 $a | torch fp32 materialised $m | torch fp32 sdpa $s"
  done
done
