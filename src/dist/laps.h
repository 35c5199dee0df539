// dist/laps.h: wall-clock phases of an EP step (EpStepStats' route / plan / dispatch / experts / combine / tail).
#pragma once

#include <chrono>

namespace kimi::dist {

// Seconds since the last lap (or construction): one phase's wall time.
struct Laps {
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - t).count();
    t = now;
    return s;
  }
};

}  // namespace kimi::dist
