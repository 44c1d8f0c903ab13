#include "monitor/event_log.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <stdexcept>

namespace plexus::monitor {
namespace {

// "2026-11-23T19:40:00.123Z": what log shippers and jq users expect.
std::string utc_timestamp(std::chrono::system_clock::time_point now) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[96];  // room for any int the compiler can imagine
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return text;
}

}  // namespace

EventLog::EventLog(std::string node, std::string file_path, size_t keep)
    : node_(std::move(node)), file_path_(std::move(file_path)), keep_(std::max<size_t>(keep, 1)) {
  if (file_path_.empty()) return;
  file_ = std::fopen(file_path_.c_str(), "ae");
  if (file_ == nullptr) {
    throw std::runtime_error("cannot open the event file " + file_path_ +
                             " for appending: " + std::strerror(errno));
  }
}

std::string EventLog::reopen(const std::string& file_path) {
  std::FILE* file = nullptr;
  if (!file_path.empty()) {
    file = std::fopen(file_path.c_str(), "ae");
    if (file == nullptr) {
      return "cannot open the event file " + file_path + " for appending: " + std::strerror(errno);
    }
  }
  std::lock_guard lock(mutex_);
  if (file_ != nullptr) std::fclose(file_);
  file_ = file;
  file_path_ = file_path;
  file_failed_ = false;
  return {};
}

EventLog::~EventLog() {
  if (file_ != nullptr) std::fclose(file_);
}

uint64_t EventLog::emit(std::string_view kind, std::string_view severity, std::string message,
                        nlohmann::json evidence) {
  const auto now = std::chrono::system_clock::now();
  nlohmann::json event;
  event["time"] = utc_timestamp(now);
  event["unix_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  event["node"] = node_;
  event["kind"] = kind;
  event["severity"] = severity;
  event["message"] = message;
  event["evidence"] = std::move(evidence);
  if (severity == "info") {
    spdlog::info("event {}: {}", kind, message);
  } else {
    spdlog::warn("event {}: {}", kind, message);
  }
  std::lock_guard lock(mutex_);
  const uint64_t seq = next_seq_++;
  ++counts_[{std::string(kind), std::string(severity)}];
  event["seq"] = seq;
  // Invalid UTF-8 (a peer's name, a process name) is replaced, never a throw.
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (file_ != nullptr) {
    const bool written = std::fprintf(file_, "%s\n", line.c_str()) > 0 && std::fflush(file_) == 0;
    if (!written && !file_failed_) {
      file_failed_ = true;  // once: a full disk must not flood the log
      spdlog::error("cannot append to the event file {}: {}", file_path_, std::strerror(errno));
    }
    if (written) file_failed_ = false;
  }
  lines_.push_back(std::move(line));
  while (lines_.size() > keep_) {
    lines_.pop_front();
    ++first_seq_;
  }
  return seq;
}

EventLog::Page EventLog::after(uint64_t after, size_t max) const {
  std::lock_guard lock(mutex_);
  Page page;
  after = std::min(after, next_seq_ - 1);  // past the newest: from the newest on
  uint64_t from = after + 1;
  if (from < first_seq_) {
    page.missed = first_seq_ - from;
    from = first_seq_;
  }
  for (uint64_t seq = from; seq < next_seq_ && page.lines.size() < max; ++seq) {
    page.lines.push_back(lines_[static_cast<size_t>(seq - first_seq_)]);
  }
  page.next_after = from + page.lines.size() - 1;
  if (page.lines.empty()) page.next_after = std::max(after, from - 1);
  return page;
}

std::map<std::pair<std::string, std::string>, uint64_t> EventLog::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

uint64_t EventLog::last_seq() const {
  std::lock_guard lock(mutex_);
  return next_seq_ - 1;
}

}  // namespace plexus::monitor
