#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer + UndefinedBehaviorSanitizer in BUILD_DIR and runs
# it. The compiler is clang 16 with LLVM's OpenMP runtime (libomp), so this job is also the
# suite's clang + libomp build, the toolchain of a macOS build (the main build is gcc + libgomp).
# CTest runs this as the test `sanitize` (label sanitize); it also works by hand:
#   scripts/sanitize-tests.sh build/nested-sanitize
# Excluded, each for its reason (see docs/hardening.md):
#   CliTest.PeakMemoryMatchesEstimate  compares resident memory with the model's estimate;
#                                      ASan's shadow memory and redzones are not in the estimate.
#   HardeningSurfaces.DeeplyNested*, .OutOfMemoryOutsideTrainDoesNotAdviseABatch
#                                      run reftrain under an address-space limit (ulimit -v) to
#                                      prove a reader stays small or to provoke out of memory;
#                                      ASan reserves terabytes of shadow address space at start
#                                      and aborts under any such limit.
#   webgpu_replay                      its time (150 s, the job's longest test) is Dawn's software
#                                      GPU replaying golden runs in node, which no sanitizer
#                                      instruments; the reftrain commands it drives (golden run
#                                      with call dumps, compare --subset, --first-divergence) run
#                                      under the sanitizers in KernelDump.*, CompareHardening.*
#                                      and webgpu_llmc.
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:?usage: $0 BUILD_DIR}"
excluded='^(CliTest\.PeakMemoryMatchesEstimate|HardeningSurfaces\.DeeplyNested.*|HardeningSurfaces\.OutOfMemoryOutsideTrainDoesNotAdviseABatch|webgpu_replay)$'

start=$(date +%s)
# -O1: ASan's recommended level, and a quicker compile than Release's -O3.
cmake -S "$src" -B "$build" -DCMAKE_CXX_COMPILER=clang++-16 -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
  -DREFTRAIN_SANITIZE=ON -DREFTRAIN_BUILD_BENCH=OFF -DREFTRAIN_NESTED_TESTS=OFF \
  -DCMAKE_UNITY_BUILD=ON >/dev/null
cmake --build "$build" -j"$(nproc)"
built=$(date +%s)
# halt_on_error: the first report fails the test; detect_leaks: leaks count as failures too.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:abort_on_error=0:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
# OpenMP threads sleep instead of spinning at barriers (as CTest sets for every test of the
# suite): on a busy runner a spinning thread holds the core its partner needs, and a two-thread
# test took 70 s instead of 4.
export OMP_WAIT_POLICY=PASSIVE
# As many tests at a time as cores: with threads sleeping at barriers, a second test fills the
# core that one test leaves idle in its serial work (setup, file I/O, checks under ASan). CTest
# runs this job on its own (RUN_SERIAL), so nothing else shares the cores.
ctest --test-dir "$build" --output-on-failure -E "$excluded" -j"$(nproc)"
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s"
