// The samples of one Prometheus scrape, gathered into families by metric name: callers add
// counters, gauges and histograms with their labels; take() hands prometheus-cpp's
// families to its serializer. Families are made on first use, so none is empty.
#pragma once

#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace plexus::monitor {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class MetricFamilies {
 public:
  void counter(const std::string& name, const std::string& help, const MetricLabels& labels,
               double value);
  void gauge(const std::string& name, const std::string& help, const MetricLabels& labels,
             double value);
  // `counts` has one entry per bucket of `upper_bounds` plus the +Inf bucket (not cumulative).
  void histogram(const std::string& name, const std::string& help, const MetricLabels& labels,
                 std::span<const double> upper_bounds, std::span<const uint64_t> counts,
                 double sum);
  std::vector<prometheus::MetricFamily> take();

 private:
  prometheus::ClientMetric& add(const std::string& name, const std::string& help,
                                prometheus::MetricType type, const MetricLabels& labels);
  std::vector<prometheus::MetricFamily> families_;
  std::map<std::string, size_t> index_;  // name -> families_ position
};

}  // namespace plexus::monitor
