// A plain HTTP/1.0 GET to a loopback server (the daemon's /metrics, a test Prometheus's
// API), bounded in time, so tests need no HTTP client installed.
#pragma once

#include <chrono>
#include <string>

namespace plexus::test {

struct HttpReply {
  int status = 0;  // 0: no answer (refused, timed out, malformed)
  std::string body;
};

// `url`: "http://127.0.0.1:PORT/path?query".
HttpReply http_get(const std::string& url,
                   std::chrono::milliseconds limit = std::chrono::seconds(5));

// The value of the sample `series` (name with its labels exactly as exposed, e.g.
// `plexus_ops_total{plexus_job="a",collective="allreduce"}`) in a text-format scrape, or
// -1 when absent.
double sample_value(const std::string& scrape, const std::string& series);

}  // namespace plexus::test
