#include "monitor/prometheus_endpoint.h"

#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

namespace plexus::monitor {

class PrometheusEndpoint::Source : public prometheus::Collectable {
 public:
  explicit Source(PrometheusEndpoint::Collector collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override { return collect_(); }

 private:
  PrometheusEndpoint::Collector collect_;
};

PrometheusEndpoint::PrometheusEndpoint(const std::string& address, Collector collect)
    : source_(std::make_shared<Source>(std::move(collect))) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    throw std::runtime_error("metrics address " + address + " is not IP:PORT");
  }
  host_ = address.substr(0, colon);
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(address, 1);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + address + ": " + e.what() +
                             " (another process on that port? --metrics-listen, or --metrics off)");
  }
  exposer_->RegisterCollectable(source_);
}

PrometheusEndpoint::~PrometheusEndpoint() {
  // The web server's accept loop looks at its stop flag between 2-second polls; stopping
  // would wait out the poll. A connection (closed at once) ends the poll early.
  const std::vector<int> ports = exposer_->GetListeningPorts();
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped.store(true);
  });
  sockaddr_in to{};
  to.sin_family = AF_INET;
  const bool wakeable = !ports.empty() && ::inet_pton(AF_INET, host_.c_str(), &to.sin_addr) == 1;
  if (wakeable) {
    if (to.sin_addr.s_addr == htonl(INADDR_ANY)) to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    to.sin_port = htons(static_cast<uint16_t>(ports[0]));
    for (int attempt = 0; attempt < 400 && !stopped.load(); ++attempt) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0) {
        (void)::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
        ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  stopper.join();
}

std::string PrometheusEndpoint::url() const {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  return "http://" + host_ + ":" + (ports.empty() ? std::string("?") : std::to_string(ports[0])) +
         "/metrics";
}

}  // namespace plexus::monitor
