// Events an operator should see (a stalled op, a slow path, rank skew, a failover): each
// one JSON line with its evidence, kept in memory for plexusctl events and appended to a
// file for log shippers. Thread-safe; events are rare and never raised on the data path,
// so a mutex is enough.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace plexus::monitor {

class EventLog {
 public:
  // `node` is written into every event; `file_path` (empty: none) is opened for appending
  // now, throwing std::runtime_error naming it when it cannot be.
  EventLog(std::string node, std::string file_path = {}, size_t keep = 1024);
  // Appends to `file_path` from now on (empty: no file), after a config reload or a log
  // rotation. Returns "" or why not; the file in use is then kept.
  [[nodiscard]] std::string reopen(const std::string& file_path);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Records one event: `kind` names the rule ("op_stalled", "slow_path", ...), `severity`
  // is "info", "warning" or "error", `evidence` holds what the rule saw. Returns its
  // sequence number (from 1).
  uint64_t emit(std::string_view kind, std::string_view severity, std::string message,
                nlohmann::json evidence = nlohmann::json::object());

  struct Page {
    std::vector<std::string> lines;  // JSON objects, oldest first
    uint64_t next_after = 0;         // pass back to continue after these
    uint64_t missed = 0;             // events after `after` no longer kept in memory
  };
  // Up to `max` events with a sequence number above `after`.
  Page after(uint64_t after, size_t max) const;

  uint64_t last_seq() const;
  // Events so far by (kind, severity), for the exporter's plexus_events_total.
  std::map<std::pair<std::string, std::string>, uint64_t> counts() const;

 private:
  std::string node_;
  std::string file_path_;
  std::FILE* file_ = nullptr;
  size_t keep_;
  mutable std::mutex mutex_;
  std::deque<std::string> lines_;  // lines_[i] has sequence number first_seq_ + i
  uint64_t first_seq_ = 1;
  uint64_t next_seq_ = 1;
  bool file_failed_ = false;
  std::map<std::pair<std::string, std::string>, uint64_t> counts_;
};

}  // namespace plexus::monitor
