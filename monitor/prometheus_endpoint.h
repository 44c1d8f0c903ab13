// Serves Prometheus' text format over HTTP (prometheus-cpp's pull exposer): each scrape
// of /metrics calls `collect` on the exposer's thread. Starting and stopping the exposer
// costs about a second (its web server's thread); one lives for the daemon's lifetime.
#pragma once

#include <prometheus/collectable.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace prometheus {
class Exposer;
}

namespace plexus::monitor {

class PrometheusEndpoint {
 public:
  using Collector = std::function<std::vector<prometheus::MetricFamily>()>;

  // Listens on `address` ("ip:port", port 0: a free one). Throws std::runtime_error naming
  // the address when it cannot.
  PrometheusEndpoint(const std::string& address, Collector collect);
  ~PrometheusEndpoint();
  PrometheusEndpoint(const PrometheusEndpoint&) = delete;
  PrometheusEndpoint& operator=(const PrometheusEndpoint&) = delete;

  // "http://127.0.0.1:9355/metrics", with the port it got.
  std::string url() const;

 private:
  class Source;
  std::string host_;
  std::shared_ptr<Source> source_;
  std::unique_ptr<prometheus::Exposer> exposer_;
};

}  // namespace plexus::monitor
