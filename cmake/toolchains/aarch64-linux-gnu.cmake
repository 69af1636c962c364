# Cross-compiling reftrain for aarch64 Linux (Graviton, Raspberry Pi 4/5, Ampere; Apple Silicon
# builds natively, see README.md) on a Debian x86-64 machine, with Debian's cross compiler:
#
#   apt-get install g++-aarch64-linux-gnu qemu-user-static googletest  # scripts/install-deps.sh
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
#         -DREFTRAIN_BUILD_BENCH=OFF
#   cmake --build build-aarch64 -j2 --target reftrain reftrain_kernel_tests
#   ctest --test-dir build-aarch64          # every test binary runs under qemu (emulator below)
#
# The target's C library, libstdc++ and libgomp come with the cross compiler under
# /usr/aarch64-linux-gnu. The other dependencies are header-only (Eigen, xsimd, CLI11,
# nlohmann-json): the build machine's copies in /usr/include serve any target, so their CMake
# packages are looked up on the build machine too. GoogleTest is compiled for the target from
# Debian's source package `googletest` (tests/CMakeLists.txt), since the installed libgtest is
# x86-64 code; that takes one package and a few seconds of build, where Debian's arm64
# libgtest-dev would need an arm64 architecture added to the machine's dpkg (multiarch).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Libraries only from the target's sysroot; programs (python3, node) from the build machine;
# headers and CMake packages from both.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# Debian installs xsimd's package files under the build machine's multiarch directory
# (/usr/lib/x86_64-linux-gnu/cmake/xsimd), which a search for an aarch64 target does not visit
# (it looks in /usr/lib/aarch64-linux-gnu). The files only name headers, so point at them.
if(NOT DEFINED xsimd_DIR)
  file(GLOB _reftrain_xsimd_dirs /usr/lib/*-linux-gnu/cmake/xsimd)
  if(_reftrain_xsimd_dirs)
    list(GET _reftrain_xsimd_dirs 0 _reftrain_xsimd_dir)
    set(xsimd_DIR ${_reftrain_xsimd_dir} CACHE PATH "xsimd's CMake package (header-only)")
  endif()
endif()

# CTest (and gtest_discover_tests) run the target's binaries through qemu's user-mode emulator,
# with the cross libraries as the dynamic loader's root.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -L /usr/aarch64-linux-gnu)
