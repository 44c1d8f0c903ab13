// The config file's jobs table: each job's default scheduling policy and its admission caps
// (daemon/engine/job_settings.h), as
//
//   [jobs.trainer]
//   class = "bulk"                  # latency, bulk or background
//   weight = 3                      # within its class, 1..1000
//   max_inflight_bytes = 1073741824 # 0 (the default): no cap
//   max_staging_bytes = 4294967296  # 0 (the default): no cap
//
// or, on the command line, --job trainer=bulk:3 (repeatable; the weight is optional).
// Every field is checked: an unknown key, class or a bad weight is an error naming the job
// and the field.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/engine/job_settings.h"

namespace plexus::daemon {

// One "[jobs.NAME] key = value" entry from the config file: the section path (e.g.
// {"jobs", "trainer"}), the key and its value.
struct JobsTableEntry {
  std::vector<std::string> section;
  std::string key;
  std::string value;
  int line = 0;  // in the file, for the error (0: not known)
};
// Adds the entries under [jobs.*] to `table`; others are ignored. "" or the first error.
[[nodiscard]] std::string read_jobs_table(const std::vector<JobsTableEntry>& entries,
                                          JobsTable* table);
// "NAME=CLASS[:WEIGHT]" into `table`; "" or why not.
[[nodiscard]] std::string parse_job_option(const std::string& text, JobsTable* table);

}  // namespace plexus::daemon
