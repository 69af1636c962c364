// Which version of every kernel a model and its optimizer run. Every kernel has a scalar
// reference under its plain name (the teaching version, the oracle, and the name of its golden
// fixture and GPU entry point) and, where speed matters, a `_fast` production version: SIMD,
// threads, blocking. KERNELS.md lists both for every kernel.
//   kReference: every kernel's reference, the naive matmul and the materialised attention, so a
//               student can step through the textbook code and a benchmark can measure it;
//   kFast:      the production kernels (the default).
#pragma once

namespace reftrain {

enum class Kernels { kReference, kFast };

}  // namespace reftrain
