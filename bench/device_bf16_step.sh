#!/usr/bin/env bash
# bf16 on a machine without reftrain's build dependencies installed (the AMX Xeon of
# bench/RESULTS.md, "Issue 29"), with them unpacked under .deps/device/root/usr: builds the tree
# into /tmp/bd, then MODE=tests runs the kernel suites, the bf16 tests and the golden bytes at 16
# and 1 threads (and the KV-cache tests: decoding runs the bf16 paths too); MODE=steps times whole
# baby B8 T256 steps, reftrain fp32 / bf16 against PyTorch fp32 / autocast (bench/torch_step.py),
# alternating, ROUNDS rounds, at 1, 2 and 16 threads, and writes bf16 profiles at 1 and 16 threads
# to $OUT. PRESET=gpt2-124m BATCH=4 SEQ=1024 runs gpt2-124m on random GPT-2 tokens instead; SDPA=1
# adds autocast with PyTorch's fused attention; THREADS picks the thread counts (default 1 2 16).
set -uo pipefail
P=$PWD/.deps/device/root/usr
mkdir -p /usr/share/games && cp -r .deps/device/root/usr/share/games/fortunes /usr/share/games/
export LIBRARY_PATH=$P/lib/x86_64-linux-gnu
if [ ! -x /tmp/bd/tests/reftrain_tests ]; then
  cmake -S . -B /tmp/bd -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$P -DREFTRAIN_TORCH_TESTS=OFF -DREFTRAIN_NESTED_TESTS=OFF -DREFTRAIN_BUILD_BENCH=OFF > $OUT/cmake.log 2>&1
fi
cmake --build /tmp/bd -j16 --target reftrain reftrain_tests > $OUT/build.log 2>&1 || { tail -40 $OUT/build.log; exit 1; }
lscpu | grep -E "Model name|^CPU\(s\)"
grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
# Not the tests that run a Python script (PyTorch parity, the numpy oracles, the replay behind
# GoldenCli's AdamW8bit check): this build has REFTRAIN_TORCH_TESTS=OFF, so they fail here.
F='*Bf16*:GoldenBytes*:*AdamW*:*Attention*:Cast*:*CrossEntropy*:*Linear*:*LlamaOps*:*Matmul*:*Ops*:*Rope*:*Simd*:GoldenKernels*:*KernelDump*:KernelsTable*'
F+=':FirstWriter*:Models/KvCache*:StochasticRounding*-*Torch*:*Oracle*:GoldenCli.*'
if [ "${MODE:-tests}" = tests ]; then for t in 16 1; do
  (cd /tmp/bd/tests && OMP_NUM_THREADS=$t ./reftrain_tests --gtest_filter="$F" > $OUT/kt_$t.log 2>&1)
  echo "kernel tests, threads $t: rc=$? $(grep -E 'bf16 paths|^\[  PASSED  \]|^\[  FAILED  \]' $OUT/kt_$t.log | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]' $OUT/kt_$t.log | head -10
done; exit 0; fi
R=/tmp/bd/reftrain; cat /usr/share/games/fortunes/* > /tmp/text.txt
export OMP_PROC_BIND=close OMP_PLACES=cores
DA="--tokenizer bytes --data /tmp/text.txt" RUN="--preset ${PRESET:-baby} --batch ${BATCH:-8} ${SEQ:+--seq $SEQ}"
if [ "${PRESET:-baby}" = gpt2-124m ]; then
  python3 tests/torch/llmc_files.py tokens /tmp/tok.bin --count 1000000 --vocab 50257 --seed 1 > /dev/null || exit 1
  DA="--data-tokens /tmp/tok.bin"
fi
med() { python3 -c "
import json,statistics
ms=[json.loads(l)['ms'] for l in open('$1') if json.loads(l).get('type')=='step' and json.loads(l)['step']>=2]
print(round(statistics.median(ms),1))"; }
rt() { $R train $RUN --steps ${STEPS:-8} --threads $1 --precision $2 $DA --trace /tmp/t.jsonl --val-batches 1 --val-every 0 > /dev/null 2>&1 || echo fail; med /tmp/t.jsonl; }
$R train $RUN --steps 1 $DA --trace /tmp/base.jsonl --val-batches 1 > /dev/null 2>&1
tt() { python3 bench/torch_step.py /tmp/base.jsonl --threads $1 --steps ${STEPS:-8} --mode $2 ${3:+--attention $3} 2>/dev/null | python3 -c "import json,sys; print(json.loads(sys.stdin.read())['median_ms'])"; }
for th in ${THREADS:-1 2 16}; do
  for r in $(seq ${ROUNDS:-3}); do
    echo "threads $th round $r: reftrain fp32 $(rt $th fp32) bf16 $(rt $th bf16) | torch fp32 $(tt $th stock) autocast $(tt $th autocast)${SDPA:+ sdpa autocast $(tt $th autocast sdpa)}"
  done
done
$R train $RUN --steps 3 --threads 16 --precision bf16 $DA --val-batches 1 --val-every 0 --profile 2>&1 | grep -A14 "^profile" > $OUT/profile16.txt
$R train $RUN --steps 3 --threads 1 --precision bf16 $DA --val-batches 1 --val-every 0 --profile 2>&1 | grep -A14 "^profile" > $OUT/profile1.txt
