// A libuv timer owned by one object on the control thread's loop: open() makes it, start()
// and stop() run it, close() closes it once (a no-op when never opened or already closed).
// `fire` runs on the loop thread. The owner outlives the loop's handling of the close.
#pragma once

#include <uv.h>

#include <cstdint>
#include <functional>
#include <utility>

namespace plexus::daemon {

class LoopTimer {
 public:
  void open(uv_loop_t* loop, std::function<void()> fire) {
    fire_ = std::move(fire);
    uv_timer_init(loop, &timer_);
    timer_.data = this;
    open_ = true;
  }
  bool is_open() const { return open_; }
  // First after `first_ms`, then every `repeat_ms` (0: once).
  void start(uint64_t first_ms, uint64_t repeat_ms) {
    uv_timer_start(
        &timer_, [](uv_timer_t* t) { static_cast<LoopTimer*>(t->data)->fire_(); }, first_ms,
        repeat_ms);
  }
  void stop() { uv_timer_stop(&timer_); }
  void close() {
    if (!open_) return;
    uv_timer_stop(&timer_);
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    open_ = false;
  }

 private:
  uv_timer_t timer_{};
  bool open_ = false;
  std::function<void()> fire_;
};

}  // namespace plexus::daemon
