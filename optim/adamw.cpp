#include "optim/adamw.h"

#include <algorithm>
#include <cmath>

namespace reftrain {

namespace {
constexpr int kNormChunks = 64;
}

double reduce_norm_sq(const float* g, size_t n) {
  double partial[kNormChunks];
#pragma omp parallel for schedule(static)
  for (int c = 0; c < kNormChunks; ++c) {
    const size_t begin = n * c / kNormChunks;
    const size_t end = n * (c + 1) / kNormChunks;
    double s = 0.0;
    for (size_t i = begin; i < end; ++i) {
      if (std::isfinite(g[i])) s += double(g[i]) * double(g[i]);
    }
    partial[c] = s;
  }
  double total = 0.0;
  for (int c = 0; c < kNormChunks; ++c) total += partial[c];
  return total;
}

GradStats finalize_grad_stats(double norm_sq, float max_norm) {
  const float grad_norm = static_cast<float>(std::sqrt(norm_sq));
  const float clip = max_norm > 0.0f ? std::min(1.0f, max_norm / std::max(grad_norm, 1e-6f)) : 1.0f;
  return {grad_norm, clip};
}

void adamw_update(float* w, float* g, float* m, float* v, size_t n, const GradStats& stats,
                  const AdamWHyper& hp, int t) {
  // β^t on the host, as the GPU twin receives it in its `bias` uniform.
  const float beta1_t = static_cast<float>(std::pow(double(hp.beta1), t));
  const float beta2_t = static_cast<float>(std::pow(double(hp.beta2), t));
  const float b1_corr = 1.0f / std::max(1.0f - beta1_t, 1e-12f);
  const float b2_corr = 1.0f / std::max(1.0f - beta2_t, 1e-12f);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) {
    const float grad = std::isfinite(g[i]) ? g[i] * stats.clip : 0.0f;
    const float m_new = hp.beta1 * m[i] + (1.0f - hp.beta1) * grad;
    const float v_new = hp.beta2 * v[i] + (1.0f - hp.beta2) * grad * grad;
    const float m_hat = m_new * b1_corr;
    const float v_hat = v_new * b2_corr;
    w[i] -= hp.lr * (m_hat / (std::sqrt(v_hat) + hp.eps) + hp.wd * w[i]);
    m[i] = m_new;
    v[i] = v_new;
    g[i] = 0.0f;
  }
}

}  // namespace reftrain
