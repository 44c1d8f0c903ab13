#include "monitor/slow_path_streaks.h"

namespace plexus::monitor {

std::vector<SlowPathStreaks::Report> SlowPathStreaks::look(std::span<const std::string> keys,
                                                           std::span<const PathVerdict> verdicts) {
  std::vector<Report> reports;
  std::map<std::string, int> streaks;
  std::set<std::string> reported;
  for (size_t i = 0; i < keys.size() && i < verdicts.size(); ++i) {
    const std::string& key = keys[i];
    const auto before = streaks_.find(key);
    int streak = before == streaks_.end() ? 0 : before->second;
    bool was_reported = reported_.count(key) > 0;
    if (verdicts[i].kind == PathVerdict::kAtPar) {
      streak = 0;
      was_reported = false;  // reported again if it slows down again
    } else if (verdicts[i].kind == PathVerdict::kSlow) {
      ++streak;
      if (streak >= confirmations_ && !was_reported) {
        reports.push_back({i, streak});
        was_reported = true;
      }
    }
    if (streak > 0) streaks[key] = streak;
    if (was_reported) reported.insert(key);
  }
  streaks_ = std::move(streaks);
  reported_ = std::move(reported);
  return reports;
}

}  // namespace plexus::monitor
