// How a waiter (the daemon's engine, or a client waiting for a completion) spends idle
// time: busy-poll, then sched_yield between polls, then park on an eventfd. Shared by
// both sides of the boundary so they behave alike.
#pragma once

#include <chrono>
#include <cstdint>

namespace plexus::shm {

struct IdleSettings {
  uint32_t spin_us = 0;
  uint32_t yield_us = 2000;
};

// Busy-polling pays only where there are cores to spare: on a small machine a spinning
// waiter takes the CPU from the process that would produce what it waits for (measured
// on 2 cores: 2-rank 8 B allreduce 113 us median with spinning, 13 us without).
uint32_t default_spin_us();

class IdleStrategy {
 public:
  using Clock = std::chrono::steady_clock;
  explicit IdleStrategy(IdleSettings settings) : settings_(settings) {}

  // Work was found: start again from the spin phase.
  void reset() { last_work_ = Clock::now(); }
  // Waits one step of the current phase; returns true when the caller should park.
  bool idle();

 private:
  IdleSettings settings_;
  Clock::time_point last_work_ = Clock::now();
};

}  // namespace plexus::shm
