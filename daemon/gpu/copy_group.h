// Copies started together that end as one: a collective moved by the copy engines is
// done when its last block is, and fails with the first error any block had. Destroyed
// early, each copy waits for itself (CopyInFlight).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/gpu/device_memory.h"

namespace plexus::daemon::gpu {

class CopyGroup final : public CopyInFlight {
 public:
  void add(std::unique_ptr<CopyInFlight> copy) { running_.push_back(std::move(copy)); }
  size_t running() const { return running_.size(); }

  common::Result<bool> done() override {
    for (size_t i = 0; i < running_.size();) {
      common::Result<bool> ended = running_[i]->done();
      if (ended.ok() && !*ended) {
        ++i;
        continue;
      }
      keep_first(ended.error());
      running_[i] = std::move(running_.back());
      running_.pop_back();
    }
    if (!running_.empty()) return false;
    if (!error_.empty()) return common::fail(error_);
    return true;
  }
  std::string wait() override {
    for (auto& copy : running_) keep_first(copy->wait());
    running_.clear();
    return error_;
  }

 private:
  void keep_first(const std::string& error) {
    if (error_.empty()) error_ = error;
  }
  std::vector<std::unique_ptr<CopyInFlight>> running_;
  std::string error_;
};

}  // namespace plexus::daemon::gpu
