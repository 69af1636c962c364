#!/usr/bin/env bash
# Installs reftrain's build, test and data dependencies from Debian 12's archive.
# Idempotent: packages already present are skipped, and `apt-get update` runs only when
# something is missing.
set -euo pipefail

packages=(
  build-essential cmake
  # clang 16 and its OpenMP build the libFuzzer targets (gcc builds everything else, with its
  # own libgomp). Not libomp-dev: it is clang 14's and conflicts with libomp-16-dev.
  clang-16 libclang-rt-16-dev libomp-16-dev llvm
  libeigen3-dev libxsimd-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev  # bench/bench_matmul's peer only: reftrain itself links no BLAS
  python3 python3-torch python3-numpy
  librsvg2-bin util-linux  # tests: rsvg-convert renders loss plots; unshare/mount, fault tests
  libopenmpi-dev openmpi-bin  # data-parallel training: mpirun -np N reftrain train
  fortunes
  # WebGPU tests (scripts/install-webgpu.sh): the Vulkan loader, and what the backported lavapipe
  # driver links against; the driver itself is unpacked into .deps/webgpu/, not installed.
  libvulkan1 libllvm15 libelf1 libexpat1 libwayland-client0 libx11-xcb1 libxcb1 libxcb-dri3-0
  libxcb-present0 libxcb-randr0 libxcb-shm0 libxcb-sync1 libxcb-xfixes0 libxshmfence1 libzstd1
  zlib1g
)
# The aarch64 test of an x86-64 machine (tests/golden/test_aarch64.cpp): the cross compiler,
# qemu's user-mode emulator, and GoogleTest's sources to compile for the target.
if [ "$(dpkg --print-architecture)" = amd64 ]; then
  packages+=(g++-aarch64-linux-gnu qemu-user-static googletest)
fi
# Node.js runs the WebGPU tests; a machine may already have it from elsewhere (nodesource ships
# npm inside its nodejs package, which Debian's npm package would conflict with).
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

"$(dirname "${BASH_SOURCE[0]}")/install-webgpu.sh"
"$(dirname "${BASH_SOURCE[0]}")/install-tokenizer-deps.sh"
