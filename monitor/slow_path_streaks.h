// Which slow-path verdicts (judge_paths) become a slow_path event. One low sample (a
// receiver descheduled for a moment) is not a slow path: a path must be found slow in
// several looks with no look finding it at par in between. A look that cannot judge it (no
// busy window, or an app-limited sample) neither confirms nor clears it: the engine sends
// less over a path it measures slow, so a slow path is unjudged in many of its looks, and a
// streak that such a look reset could take seconds to complete on a loaded host. A path is
// reported once, and again only after a look has found it back at par.
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
  explicit SlowPathStreaks(int confirmations) : confirmations_(confirmations) {}

  struct Report {
    size_t index = 0;  // into the look's paths
    int streak = 0;    // looks that found it slow since it was last at par
  };
  // One look at every path watched now: keys[i] names path i (stable across looks),
  // verdicts[i] is its verdict. Paths not in the look are forgotten. Returns those to
  // report now.
  std::vector<Report> look(std::span<const std::string> keys,
                           std::span<const PathVerdict> verdicts);

 private:
  int confirmations_;
  std::map<std::string, int> streaks_;  // by path: looks found slow since it was at par
  std::set<std::string> reported_;      // and not yet found back at par
};

}  // namespace plexus::monitor
