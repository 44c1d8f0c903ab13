#include "daemon/engine/session_table.h"

#include <algorithm>

namespace plexus::daemon {

Session& SessionTable::add(std::shared_ptr<Session> session) {
  sessions_.push_back(std::move(session));
  order_dirty_ = true;
  return *sessions_.back();
}

void SessionTable::erase(const Session* session) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(),
                         [&](const auto& s) { return s.get() == session; });
  if (it == sessions_.end()) return;
  sessions_.erase(it);
  order_dirty_ = true;
}

Session* SessionTable::find(uint64_t id) const {
  for (const auto& s : sessions_) {
    if (s->id() == id) return s.get();
  }
  return nullptr;
}

std::shared_ptr<Session> SessionTable::shared(const Session* session) const {
  for (const auto& s : sessions_) {
    if (s.get() == session) return s;
  }
  return nullptr;
}

std::shared_ptr<Session> SessionTable::shared(uint64_t id) const {
  for (const auto& s : sessions_) {
    if (s->id() == id) return s;
  }
  return nullptr;
}

const SessionTable::List& SessionTable::by_class(uint64_t jobs_version) {
  if (order_dirty_ || order_version_ != jobs_version) {
    by_class_ = sessions_;
    std::stable_sort(by_class_.begin(), by_class_.end(), [](const auto& a, const auto& b) {
      return a->traffic_class() < b->traffic_class();
    });
    order_version_ = jobs_version;
    order_dirty_ = false;
  }
  return by_class_;
}

bool SessionTable::wait_on_gpu() const {
  for (const auto& session : sessions_) {
    if (!session->held_for_stream.empty() || !session->staging.empty() ||
        !session->copying_back.empty()) {
      return true;
    }
  }
  return false;
}

}  // namespace plexus::daemon
