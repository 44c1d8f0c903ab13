#include "daemon/jobs_table.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace plexus::daemon {
namespace {

std::string set_class(const std::string& job, const std::string& value,
                      transports::FlowPolicy* policy) {
  if (std::string bad = transports::check_traffic_class(value); !bad.empty()) {
    return "job '" + job + "': " + bad;
  }
  policy->traffic_class = *transports::parse_traffic_class(value);
  return {};
}

std::string set_weight(const std::string& job, const std::string& value,
                       transports::FlowPolicy* policy) {
  errno = 0;
  char* end = nullptr;
  const long long w = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || end == nullptr || *end != '\0' || errno != 0) {
    return "job '" + job + "': weight '" + value.substr(0, 64) + "' is not a whole number";
  }
  std::string error = transports::check_weight(w);
  if (!error.empty()) return "job '" + job + "': " + error;
  policy->weight = static_cast<uint32_t>(w);
  return {};
}

std::string set_cap(const std::string& job, const std::string& key, const std::string& value,
                    uint64_t* cap) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long bytes = std::strtoull(value.c_str(), &end, 10);
  // strtoull alone would take leading blanks and a sign ("-1" as 2^64 - 1).
  if (value.empty() || !std::isdigit(static_cast<unsigned char>(value[0])) || end == nullptr ||
      *end != '\0' || errno != 0) {
    return "job '" + job + "': " + key + " '" + value.substr(0, 64) +
           "' is not a whole number of bytes (0: no cap)";
  }
  *cap = bytes;
  return {};
}

bool valid_name(const std::string& name) { return !name.empty() && name.size() <= 64; }

}  // namespace

std::string read_jobs_table(const std::vector<JobsTableEntry>& entries, JobsTable* table) {
  for (const JobsTableEntry& e : entries) {
    if (e.section.empty() || e.section[0] != "jobs") continue;
    if (e.key == "++" || e.key == "--") continue;  // a section's opening and closing marks
    if (e.section.size() != 2 || !valid_name(e.section[1])) {
      return "the jobs table takes [jobs.NAME] sections (a name of 1..64 characters), not '" +
             e.key + "' directly under [jobs]";
    }
    const std::string& job = e.section[1];
    JobSettings& settings = (*table)[job];
    std::string error;
    if (e.key == "class") {
      error = set_class(job, e.value, &settings.policy);
    } else if (e.key == "weight") {
      error = set_weight(job, e.value, &settings.policy);
    } else if (e.key == "max_inflight_bytes") {
      error = set_cap(job, e.key, e.value, &settings.caps.max_inflight_bytes);
    } else if (e.key == "max_staging_bytes") {
      error = set_cap(job, e.key, e.value, &settings.caps.max_staging_bytes);
    } else {
      error = "job '" + job + "': unknown key '" + e.key.substr(0, 64) +
              "' (a job takes class, weight, max_inflight_bytes and max_staging_bytes)";
    }
    if (!error.empty()) return error;
  }
  return {};
}

std::string parse_job_option(const std::string& text, JobsTable* table) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || !valid_name(text.substr(0, eq))) {
    return "--job '" + text.substr(0, 80) + "': expected NAME=CLASS[:WEIGHT]";
  }
  const std::string job = text.substr(0, eq);
  const std::string rest = text.substr(eq + 1);
  const size_t colon = rest.find(':');
  transports::FlowPolicy policy;
  std::string error = set_class(job, rest.substr(0, colon), &policy);
  if (error.empty() && colon != std::string::npos) {
    error = set_weight(job, rest.substr(colon + 1), &policy);
  }
  if (!error.empty()) return error;
  (*table)[job].policy = policy;  // its caps, if the file set them, stay
  return {};
}

}  // namespace plexus::daemon
