// The fast kernels compiled a second time for x86-64-v3 (AVX2 + FMA), with namespace reftrain
// renamed to reftrain_avx2 (tests/CMakeLists.txt: ops_fast_avx2), so one test binary can hold the
// AVX2 code and the native code side by side and require the same bits from both.
//
// Their declarations are the real ops headers, not copies typed here: tests/CMakeLists.txt copies
// each one into the build tree without its #pragma once (which would skip a header already
// included for namespace reftrain), and they are included below under the same rename the object
// library is compiled with. A changed signature, default argument or enum changes both sides.
#pragma once

#include <cstddef>
#include <cstdint>

#define reftrain reftrain_avx2
#include "avx2/ops/activation.h"
#include "avx2/ops/attention.h"
#include "avx2/ops/loss.h"
#include "avx2/ops/norm.h"
#undef reftrain
