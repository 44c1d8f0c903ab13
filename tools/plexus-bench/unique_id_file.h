// A communicator's unique id passed between processes through a file: rank 0 writes it
// (lowercase hex, replaced whole: readers see all of it or none), the others wait for it.
// What plexus-bench's PLEXUS_UNIQUE_ID_FILE and --id-file use, and the multi-job load tool.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "plexus/plexus.h"

namespace plexus::bench {

// The unique id as text (lowercase hex, no newline), and back.
std::string unique_id_to_hex(const plexus_unique_id_t& id);
std::optional<plexus_unique_id_t> unique_id_from_hex(std::string_view text);

// Rank 0's side of the exchange.
void publish_unique_id(const std::string& path, const plexus_unique_id_t& id);
// The other ranks': polls `path` until it holds an id. Throws std::runtime_error naming the
// file when it holds something else, or nothing appears within `patience`.
plexus_unique_id_t wait_for_unique_id(const std::string& path,
                                      std::chrono::steady_clock::duration patience);

}  // namespace plexus::bench
