// Which slow-path verdicts (judge_paths) become a slow_path event. One low sample (a
// receiver descheduled for a moment) is not a slow path: a path must be found slow in
// several looks with no look finding it at par in between. A look that cannot judge it
// (no busy window, no rate, an app-limited sample, no busy sibling) neither confirms nor
// clears it: the engine sends less over a path it measures slow, so a slow path is unjudged
// in many of its looks, and a streak that such a look reset could take seconds to complete
// on a loaded host. Too many such looks in a row, though, and the streak lapses: low
// samples hours apart are not one slow path. A path is reported once, and again only after
// a look has found it back at par or it has left the looks (failed, drained); a lapse does
// not count: a slow path the engine starves for seconds, then tries again, is one path
// still slow, not a new event every few seconds.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "monitor/slow_paths.h"

namespace plexus::monitor {

class SlowPathStreaks {
 public:
  // `confirmations`: slow looks needed; `max_gap`: unjudged looks in a row a streak
  // survives.
  SlowPathStreaks(int confirmations, int max_gap)
      : confirmations_(confirmations), max_gap_(max_gap) {}

  struct Report {
    size_t index = 0;  // into the look's paths
    int streak = 0;    // slow looks since it was last at par, lapsed, or new to the looks
  };
  // One look at every path watched now: keys[i] names path i (stable across looks, one
  // path per key), verdicts[i] is its verdict. Paths not in the look are forgotten.
  // Returns those to report now.
  std::vector<Report> look(std::span<const std::string> keys,
                           std::span<const PathVerdict> verdicts);

 private:
  struct Streak {
    int slow = 0;      // looks found slow
    int unjudged = 0;  // looks in a row since the last slow one that could not judge it
  };
  int confirmations_;
  int max_gap_;
  std::map<std::string, Streak> streaks_;  // by path, while its streak runs
  std::set<std::string> reported_;         // by path: reported, not yet found back at par
};

}  // namespace plexus::monitor
