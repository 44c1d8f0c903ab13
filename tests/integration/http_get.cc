#include "tests/integration/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>

namespace plexus::test {

HttpReply http_get(const std::string& url, std::chrono::milliseconds limit) {
  HttpReply reply;
  const std::string prefix = "http://";
  if (url.rfind(prefix, 0) != 0) return reply;
  const size_t host_end = url.find('/', prefix.size());
  const std::string host_port = url.substr(prefix.size(), host_end - prefix.size());
  const std::string path = host_end == std::string::npos ? "/" : url.substr(host_end);
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return reply;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(host_port.substr(colon + 1))));
  if (::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &to.sin_addr) != 1) return reply;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return reply;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string raw;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + host_port + "\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fd, POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char buffer[65536];
        const ssize_t n = ::read(fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        raw.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  ::close(fd);
  const size_t body = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || body == std::string::npos || raw.size() < 12) return reply;
  reply.status = std::stoi(raw.substr(9, 3));
  reply.body = raw.substr(body + 4);
  return reply;
}

double sample_value(const std::string& scrape, const std::string& series) {
  std::istringstream in(scrape);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

}  // namespace plexus::test
