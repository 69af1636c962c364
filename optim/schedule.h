// Learning-rate schedule: linear warmup, then cosine decay to min_lr (or constant).
//   step < warmup:  lr·(step+1)/warmup
//   cosine:         min_lr + ½(1 + cos(π·p))·(lr - min_lr),  p = (step-warmup)/(steps-warmup)
// step counts from 0, so p runs over [0, 1) and the last step still has lr above min_lr.
#pragma once

namespace reftrain {

enum class Schedule { kCosine, kConstant };

struct LrSchedule {
  float lr;
  float min_lr;
  int warmup;
  int steps;
  Schedule kind;
};

float learning_rate(const LrSchedule& s, int step);

}  // namespace reftrain
