// Turning a failed libplexus call into an exception that names the call, so every failure
// reaches the user as "plexus-bench: rank R: <call> failed: <why>".
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "plexus/plexus.h"

namespace plexus::bench {

class PlexusCallError : public std::runtime_error {
 public:
  PlexusCallError(std::string call, plexus_result_t result, const std::string& reason)
      : std::runtime_error(reason), call_(std::move(call)), result_(result) {}

  const std::string& call() const { return call_; }
  plexus_result_t result() const { return result_; }

 private:
  std::string call_;
  plexus_result_t result_;
};

// Throws PlexusCallError unless result is PLEXUS_SUCCESS. Must run right after the call:
// plexus_get_last_error() only describes the thread's latest call.
inline void check_plexus(plexus_result_t result, const char* call) {
  if (result == PLEXUS_SUCCESS) return;
  const char* last_error = plexus_get_last_error();
  std::string reason = last_error != nullptr && last_error[0] != '\0'
                           ? std::string(last_error)
                           : std::string(plexus_result_string(result));
  throw PlexusCallError(call, result, reason);
}

}  // namespace plexus::bench
