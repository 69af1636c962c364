#include "optim/schedule.h"

#include <cmath>

namespace reftrain {

float learning_rate(const LrSchedule& s, int step) {
  if (step < s.warmup) return s.lr * float(step + 1) / float(s.warmup);
  if (s.kind == Schedule::kConstant || s.steps <= s.warmup) return s.lr;
  const double p = double(step - s.warmup) / double(s.steps - s.warmup);
  const double pi = 3.14159265358979323846;
  return static_cast<float>(s.min_lr + 0.5 * (1.0 + std::cos(pi * p)) * (s.lr - s.min_lr));
}

}  // namespace reftrain
