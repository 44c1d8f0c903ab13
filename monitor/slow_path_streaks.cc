#include "monitor/slow_path_streaks.h"

namespace plexus::monitor {

std::vector<SlowPathStreaks::Report> SlowPathStreaks::look(std::span<const std::string> keys,
                                                           std::span<const PathVerdict> verdicts) {
  std::vector<Report> reports;
  std::map<std::string, Streak> streaks;
  std::set<std::string> reported;
  for (size_t i = 0; i < keys.size() && i < verdicts.size(); ++i) {
    const std::string& key = keys[i];
    const auto before = streaks_.find(key);
    Streak streak = before == streaks_.end() ? Streak{} : before->second;
    bool was_reported = reported_.count(key) > 0;
    switch (verdicts[i].kind) {
      case PathVerdict::kAtPar:
        streak = {};
        was_reported = false;  // reported again if it slows down again
        break;
      case PathVerdict::kSlow:
        ++streak.slow;
        streak.unjudged = 0;
        if (streak.slow >= confirmations_ && !was_reported) {
          reports.push_back({i, streak.slow});
          was_reported = true;
        }
        break;
      case PathVerdict::kUnjudged:
        if (++streak.unjudged > max_gap_) streak = {};
        break;
    }
    if (streak.slow > 0) streaks[key] = streak;
    if (was_reported) reported.insert(key);
  }
  streaks_ = std::move(streaks);
  reported_ = std::move(reported);
  return reports;
}

}  // namespace plexus::monitor
