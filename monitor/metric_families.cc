#include "monitor/metric_families.h"

#include <limits>

namespace plexus::monitor {

prometheus::ClientMetric& MetricFamilies::add(const std::string& name, const std::string& help,
                                              prometheus::MetricType type,
                                              const MetricLabels& labels) {
  auto [it, inserted] = index_.try_emplace(name, families_.size());
  if (inserted) {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = type;
    families_.push_back(std::move(family));
  }
  prometheus::ClientMetric& metric = families_[it->second].metric.emplace_back();
  for (const auto& [key, value] : labels) metric.label.push_back({key, value});
  return metric;
}

void MetricFamilies::counter(const std::string& name, const std::string& help,
                             const MetricLabels& labels, double value) {
  add(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void MetricFamilies::gauge(const std::string& name, const std::string& help,
                           const MetricLabels& labels, double value) {
  add(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void MetricFamilies::histogram(const std::string& name, const std::string& help,
                               const MetricLabels& labels, std::span<const double> upper_bounds,
                               std::span<const uint64_t> counts, double sum) {
  auto& h = add(name, help, prometheus::MetricType::Histogram, labels).histogram;
  uint64_t cumulative = 0;
  for (size_t b = 0; b < counts.size(); ++b) {
    cumulative += counts[b];
    const double bound =
        b < upper_bounds.size() ? upper_bounds[b] : std::numeric_limits<double>::infinity();
    h.bucket.push_back({cumulative, bound});
  }
  h.sample_count = cumulative;
  h.sample_sum = sum;
}

std::vector<prometheus::MetricFamily> MetricFamilies::take() {
  index_.clear();
  return std::move(families_);
}

}  // namespace plexus::monitor
