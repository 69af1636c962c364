#!/usr/bin/env bash
# The dependencies the bench/device_*.sh scripts build against, for a machine that has a
# compiler, CMake, Ninja and PyTorch but no apt and no network (the GPU machine of
# bench/RESULTS.md): run this on a Debian 12 machine that has apt, then carry the folder there.
# It unpacks the header-only libraries, GoogleTest, Google Benchmark and the fortunes text
# (reftrain's default corpus) under ROOT; nothing is installed on this machine.
#   bash bench/device_deps.sh [ROOT]        (default .deps/device/root, about 20 MB)
set -euo pipefail
ROOT=${1:-$PWD/.deps/device/root}
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
(cd "$download" && apt-get download -q libgtest-dev libgmock-dev libxsimd-dev libeigen3-dev \
  nlohmann-json3-dev libcli11-dev libbenchmark-dev libbenchmark1debian fortunes fortunes-min)
mkdir -p "$ROOT"
for deb in "$download"/*.deb; do dpkg -x "$deb" "$ROOT"; done
rm -rf "$ROOT/usr/share/doc"
du -sh "$ROOT"
