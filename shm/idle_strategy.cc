#include "shm/idle_strategy.h"

#include <sched.h>

#include <thread>

namespace plexus::shm {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

uint32_t default_spin_us() { return std::thread::hardware_concurrency() >= 4 ? 50 : 0; }

bool IdleStrategy::idle() {
  const auto quiet = Clock::now() - last_work_;
  if (quiet < std::chrono::microseconds(settings_.spin_us)) {
    for (int i = 0; i < 16; ++i) cpu_relax();
    return false;
  }
  if (quiet < std::chrono::microseconds(settings_.spin_us + settings_.yield_us)) {
    sched_yield();
    return false;
  }
  return true;
}

}  // namespace plexus::shm
