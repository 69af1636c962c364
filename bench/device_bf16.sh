#!/usr/bin/env bash
# The bf16 checks and timings on a machine without reftrain's build dependencies (the AMX Xeon of
# bench/RESULTS.md): compiles the bf16 tests and bench/bench_bf16.cpp directly against the
# header-only dependencies under $DEPS (include/, lib/ with GoogleTest), runs the tests at 16 and
# 1 threads (every available path against the reference, the PyTorch/rational oracle), then the
# timings of bench_bf16 and bench/torch_bf16.py at 1 and 16 threads.
#   DEPS=.deps/device/root/usr bash bench/device_bf16.sh
set -uo pipefail
DEPS=${DEPS:-$PWD/.deps/device/root/usr}
export LIBRARY_PATH=$DEPS/lib:$DEPS/lib/x86_64-linux-gnu
lscpu | grep -E "Model name|^CPU\(s\)"
grep -o -w 'amx_bf16\|amx_tile\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
python3 -c "import torch, numpy; print('torch', torch.__version__)"
CXX=(g++ -O3 -march=native -ffp-contract=off -fopenmp -I. -I"$DEPS/include" -I"$DEPS/include/eigen3")
OPS=(ops/bf16.cpp ops/matmul_bf16.cpp ops/attention_bf16.cpp ops/attention.cpp ops/kernel_record.cpp)
"${CXX[@]}" -DREFTRAIN_BIN='"none"' -DREFTRAIN_SOURCE_DIR="\"$PWD\"" -DREFTRAIN_TORCH_PYTHON='"python3"' \
  tests/ops/test_bf16.cpp tests/ops/test_bf16_oracle.cpp "${OPS[@]}" -o /tmp/test_bf16 \
  -lgtest -lgtest_main -lpthread || exit 1
"${CXX[@]}" bench/bench_bf16.cpp "${OPS[@]}" ops/linear.cpp ops/matmul.cpp ops/matmul_blocked.cpp \
  ops/matmul_eigen.cpp ops/cast.cpp -o /tmp/bench_bf16 || exit 1
for t in 16 1; do
  OMP_NUM_THREADS=$t /tmp/test_bf16 > /tmp/test_bf16_$t.log 2>&1
  echo "tests at $t threads: rc=$? $(grep -E 'bf16 paths|^\[  PASSED|^\[  FAILED' /tmp/test_bf16_$t.log | tr '\n' ' ')"
  grep -B2 -A8 'Failure' /tmp/test_bf16_$t.log | head -30
done
export OMP_PROC_BIND=close OMP_PLACES=cores
timeout 300 /tmp/bench_bf16 1 16
timeout 200 python3 bench/torch_bf16.py 1 16
