// The calling thread's last error sentence (plexus_get_last_error).
#pragma once

#include <string>

#include "plexus/plexus.h"

namespace plexus::client {

// Records message as the thread's last error and returns code, for `return fail(...)`.
plexus_result_t fail(plexus_result_t code, std::string message);

}  // namespace plexus::client
