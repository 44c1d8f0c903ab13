// A path's rate samples and the queue limit its transport is given.
#include "transports/channel/path_pace.h"

#include <algorithm>

namespace plexus::transports {
namespace {

// Rate samples span at least this long, over which the path had a backlog throughout.
constexpr auto kRateSample = std::chrono::milliseconds(20);
// A rate not measured again for this long is forgotten: a path once measured slow gets a
// fair share again and is measured afresh, rather than being starved of the backlog that
// would show it has recovered.
constexpr auto kRateForgetAfter = std::chrono::seconds(1);

}  // namespace

PathPace::PathPace(const Settings& settings, TimePoint now, bool latency)
    : settings_(settings), latency_(latency), sample_start_(now) {}

void PathPace::tick(TimePoint now, FramePath& io, bool frames_waiting, bool mixing) {
  // Rate: bytes the network took over a span in which the path always had a backlog, or
  // frames waited for it to make room (so the network, not the sender, set the pace).
  if (!busy(io, frames_waiting)) busy_since_sample_ = false;
  if (now - sample_start_ < kRateSample) return;
  const double seconds = std::chrono::duration<double>(now - sample_start_).count();
  if (busy_since_sample_ && sent_bytes_ > 0) {
    const double sample = static_cast<double>(sent_bytes_) / seconds;
    rate_ = rate_ > 0 ? 0.7 * rate_ + 0.3 * sample : sample;
    rate_measured_at_ = now;
    // A sliding peak, near enough: a new high, or the old one's window over.
    if (rate_ >= peak_rate_ || now - peak_at_ >= kPeakWindow) {
      peak_rate_ = rate_;
      peak_at_ = now;
    }
  } else if (rate_ > 0 && now - rate_measured_at_ >= kRateForgetAfter) {
    rate_ = 0;
  }
  limit_queue(io, mixing);
  sent_bytes_ = 0;
  sample_start_ = now;
  busy_since_sample_ = busy(io, frames_waiting);
}

void PathPace::limit_queue(FramePath& io, bool mixing) {
  if (rate_ <= 0) return;
  const double seconds = std::chrono::duration<double>(settings_.queue_time).count();
  const uint64_t want = std::max(settings_.min_queue_bytes, static_cast<uint64_t>(rate_ * seconds));
  const bool in_flight = mixing && !latency_;
  // The rate counts on its own too: it sets the round trip's share of the in-flight limit,
  // and on a slow path `want` stays at its minimum however the rate moves.
  auto within_a_quarter = [](double value, double then) {
    return value * 4 >= then * 3 && value * 4 <= then * 5;
  };
  if (queue_limit_ != 0 && queue_in_flight_ == in_flight &&
      within_a_quarter(static_cast<double>(want), static_cast<double>(queue_limit_)) &&
      within_a_quarter(rate_, queue_rate_)) {
    return;
  }
  queue_limit_ = want;
  queue_rate_ = rate_;
  queue_in_flight_ = in_flight;
  io.limit_queue(want, rate_, in_flight);
}

}  // namespace plexus::transports
