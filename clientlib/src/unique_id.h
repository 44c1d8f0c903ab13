// plexus_unique_id_t's bytes: a random token, and the daemon where its ranks meet (the one
// that made the id). Communicators' unique ids and the weight store's keys are both made
// and read here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plexus/plexus.h"

namespace plexus::client {

struct UniqueIdParts {
  uint8_t token[16] = {};
  uint64_t root_instance = 0;               // 0: no daemon answered where it was made
  std::vector<std::string> root_addresses;  // "ip:port" of that daemon's peer listener
};

// A fresh token, and the local daemon as the root (asked without opening a session); "" or
// why not (no random bytes).
std::string make_unique_id(plexus_unique_id_t* id);
// "" or why `id` was not made by this libplexus version's make_unique_id.
std::string read_unique_id(const plexus_unique_id_t& id, UniqueIdParts* out);
void write_unique_id(const UniqueIdParts& parts, plexus_unique_id_t* id);

}  // namespace plexus::client
