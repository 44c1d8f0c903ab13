#include "clientlib/src/last_error.h"

namespace plexus::client {
// Not in an anonymous namespace: plexus_get_last_error below reads it.
thread_local std::string t_last_error;

plexus_result_t fail(plexus_result_t code, std::string message) {
  t_last_error = std::move(message);
  return code;
}

}  // namespace plexus::client

extern "C" const char* plexus_get_last_error(void) { return plexus::client::t_last_error.c_str(); }
