// Which event loop should carry the peer data path? Streams data frames one way over a
// loopback TCP connection, once with the transport's own epoll loop (TcpConnection, as
// plexusd runs it: writev of queued frames, payloads read straight to their destination)
// and once with libuv (uv_write of header + payload, uv_read_start reading exactly to
// frame boundaries into the same destination), interleaved run by run. Prints each
// side's throughput and the CPU the sending and receiving threads spent per GB.

// CLI11's string splitting trips GCC 12's -Wnull-dereference (a false positive inside
// <string>; see tools/plexus-bench/options.cc).
#pragma GCC diagnostic ignored "-Wnull-dereference"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "transports/tcp/tcp_connection.h"
#include "transports/wire/data_frame.h"

namespace {

namespace wire = plexus::transports::wire;
using plexus::transports::TcpConnection;
using Clock = std::chrono::steady_clock;

struct Params {
  uint32_t frame_bytes = 512 << 10;
  uint64_t frames = 0;
  uint32_t in_flight = 8;
  double deadline_s = 30;
};

struct ThreadResult {
  double cpu_s = 0;
  std::string error;
};

double thread_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_THREAD, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// A connected loopback pair: {sender, receiver}.
std::array<int, 2> connected_pair() {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check(listener >= 0, "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  check(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) == 0, "bind");
  check(::listen(listener, 1) == 0, "listen");
  check(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0, "getsockname");
  int sender = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  check(sender >= 0, "socket");
  check(::connect(sender, reinterpret_cast<sockaddr*>(&addr), len) == 0, "connect");
  int receiver = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  check(receiver >= 0, "accept");
  ::close(listener);
  int one = 1;
  for (int fd : {sender, receiver}) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return {sender, receiver};
}

wire::DataFrameHeader frame_header(uint64_t index, uint32_t bytes) {
  wire::DataFrameHeader h;
  h.length = bytes;
  h.comm_id = 1;
  h.op_seq = 1;
  h.chunk = static_cast<uint32_t>(index);
  return h;
}

// ---- the transport's own loop -------------------------------------------------------

ThreadResult epoll_send(int fd, const Params& p, const std::vector<std::byte>& payload) {
  ThreadResult result;
  const double cpu0 = thread_cpu_seconds();
  const auto deadline = Clock::now() + std::chrono::duration<double>(p.deadline_s);
  uint64_t queued = 0;
  uint64_t sent = 0;
  TcpConnection conn(fd, wire::DataFrameLimits{p.frame_bytes},
                     {[](const wire::DataFrameHeader&, std::span<const std::byte>) {
                        return std::string("a frame came back to the sender");
                      },
                      [&sent](uint64_t, size_t) { ++sent; }, nullptr, nullptr});
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.fd = fd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  while (sent < p.frames && result.error.empty()) {
    while (queued < p.frames && queued - sent < p.in_flight) {
      conn.queue(frame_header(queued, p.frame_bytes), payload, queued);
      ++queued;
    }
    if (!conn.on_writable()) result.error = "epoll sender: " + conn.error();
    if (conn.wants_write()) {
      epoll_event out[1];
      ::epoll_wait(ep, out, 1, 100);
    }
    if (Clock::now() > deadline) result.error = "epoll sender ran past the deadline";
  }
  ::close(ep);
  result.cpu_s = thread_cpu_seconds() - cpu0;
  return result;  // ~TcpConnection closes fd
}

ThreadResult epoll_receive(int fd, const Params& p, std::vector<std::byte>& destination) {
  ThreadResult result;
  const double cpu0 = thread_cpu_seconds();
  const auto deadline = Clock::now() + std::chrono::duration<double>(p.deadline_s);
  uint64_t frames = 0;
  auto count = [&frames](const wire::DataFrameHeader&) {
    ++frames;
    return std::string();
  };
  TcpConnection conn(fd, wire::DataFrameLimits{p.frame_bytes},
                     {[&](const wire::DataFrameHeader& h, std::span<const std::byte> data) {
                        std::memcpy(destination.data(), data.data(), data.size());
                        return count(h);
                      },
                      nullptr,
                      [&destination](const wire::DataFrameHeader&) {
                        return TcpConnection::Placement{destination, nullptr};
                      },
                      count});
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  while (frames < p.frames && result.error.empty()) {
    epoll_event in[1];
    // The sender closes once its last frame is out: an end of stream after the last
    // frame is not an error.
    if (::epoll_wait(ep, in, 1, 100) > 0 && !conn.on_readable() && frames < p.frames) {
      result.error = "epoll receiver: " + conn.error();
    }
    if (Clock::now() > deadline) result.error = "epoll receiver ran past the deadline";
  }
  ::close(ep);
  result.cpu_s = thread_cpu_seconds() - cpu0;
  return result;
}

// ---- libuv ---------------------------------------------------------------------------

void close_once(uv_handle_t* handle) {
  if (!uv_is_closing(handle)) uv_close(handle, nullptr);
}

// Fails `owner` (UvSender or UvReceiver) if the stream is not done in time.
template <typename Owner>
void start_deadline(Owner& owner, const Params& p) {
  owner.deadline.data = &owner;
  uv_timer_start(
      &owner.deadline,
      [](uv_timer_t* t) { static_cast<Owner*>(t->data)->fail("ran past the deadline"); },
      static_cast<uint64_t>(p.deadline_s * 1000), 0);
}

struct UvSender {
  const Params* p;
  const std::vector<std::byte>* payload;
  uv_tcp_t tcp;
  struct Write {
    uv_write_t req;
    std::array<std::byte, wire::kDataFrameHeaderBytes> header;
  };
  std::vector<Write> writes;  // one per frame in flight, reused: nothing allocated per frame
  uv_timer_t deadline;
  uint64_t queued = 0;
  uint64_t sent = 0;
  std::string error;

  void write(Write& w) {
    wire::encode_data_frame_header(frame_header(queued++, p->frame_bytes), w.header);
    std::array<uv_buf_t, 2> bufs = {
        uv_buf_init(reinterpret_cast<char*>(w.header.data()), wire::kDataFrameHeaderBytes),
        uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(payload->data())),
                    p->frame_bytes)};
    w.req.data = this;
    int rc = uv_write(&w.req, reinterpret_cast<uv_stream_t*>(&tcp), bufs.data(), 2, on_written);
    if (rc != 0) fail(rc);
  }
  void fail(int rc) { fail(uv_strerror(rc)); }
  void fail(const std::string& why) {
    if (error.empty()) error = "libuv sender: " + why;
    finish();
  }
  void finish() {
    close_once(reinterpret_cast<uv_handle_t*>(&tcp));
    close_once(reinterpret_cast<uv_handle_t*>(&deadline));
  }
  static void on_written(uv_write_t* req, int status) {
    auto* self = static_cast<UvSender*>(req->data);
    if (status != 0) return self->fail(status);
    ++self->sent;
    if (self->queued < self->p->frames) {
      self->write(*reinterpret_cast<Write*>(req));  // req is Write's first member
    } else if (self->sent == self->p->frames) {
      self->finish();
    }
  }
};

struct UvReceiver {
  const Params* p;
  std::vector<std::byte>* destination;
  uv_tcp_t tcp;
  std::array<std::byte, wire::kDataFrameHeaderBytes> header;
  size_t have = 0;  // of the header, then of the payload
  bool in_payload = false;
  uint32_t length = 0;
  uv_timer_t deadline;
  uint64_t frames = 0;
  std::string error;

  void fail(const std::string& why) {
    if (error.empty()) error = "libuv receiver: " + why;
    finish();
  }
  void finish() {
    close_once(reinterpret_cast<uv_handle_t*>(&tcp));
    close_once(reinterpret_cast<uv_handle_t*>(&deadline));
  }
  // Exactly the rest of the header, or of the payload, straight to where it belongs.
  static void on_alloc(uv_handle_t* handle, size_t, uv_buf_t* buf) {
    auto* self = static_cast<UvReceiver*>(handle->data);
    if (self->in_payload) {
      *buf = uv_buf_init(reinterpret_cast<char*>(self->destination->data() + self->have),
                         static_cast<unsigned>(self->length - self->have));
    } else {
      *buf = uv_buf_init(reinterpret_cast<char*>(self->header.data() + self->have),
                         static_cast<unsigned>(wire::kDataFrameHeaderBytes - self->have));
    }
  }
  static void on_read(uv_stream_t* stream, ssize_t n, const uv_buf_t*) {
    auto* self = static_cast<UvReceiver*>(stream->data);
    if (n < 0) return self->fail(uv_strerror(static_cast<int>(n)));
    self->have += static_cast<size_t>(n);
    if (!self->in_payload && self->have == wire::kDataFrameHeaderBytes) {
      wire::DecodedHeader d =
          wire::decode_data_frame_header(self->header, wire::DataFrameLimits{self->p->frame_bytes});
      if (!d.ok()) return self->fail(d.error);
      self->length = d.header.length;
      self->in_payload = true;
      self->have = 0;
    }
    if (self->in_payload && self->have == self->length) {
      self->in_payload = false;
      self->have = 0;
      if (++self->frames == self->p->frames) {
        uv_read_stop(stream);
        self->finish();
      }
    }
  }
};

ThreadResult uv_send(int fd, const Params& p, const std::vector<std::byte>& payload) {
  ThreadResult result;
  const double cpu0 = thread_cpu_seconds();
  uv_loop_t loop;
  uv_loop_init(&loop);
  UvSender s;
  s.p = &p;
  s.payload = &payload;
  s.writes.resize(std::min<uint64_t>(p.in_flight, p.frames));
  uv_tcp_init(&loop, &s.tcp);
  uv_tcp_open(&s.tcp, fd);
  uv_timer_init(&loop, &s.deadline);
  start_deadline(s, p);
  for (auto& w : s.writes) s.write(w);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  result.error = s.error;
  if (result.error.empty() && s.sent != p.frames) result.error = "libuv sender stopped early";
  result.cpu_s = thread_cpu_seconds() - cpu0;
  return result;
}

ThreadResult uv_receive(int fd, const Params& p, std::vector<std::byte>& destination) {
  ThreadResult result;
  const double cpu0 = thread_cpu_seconds();
  uv_loop_t loop;
  uv_loop_init(&loop);
  UvReceiver r;
  r.p = &p;
  r.destination = &destination;
  uv_tcp_init(&loop, &r.tcp);
  uv_tcp_open(&r.tcp, fd);
  r.tcp.data = &r;
  uv_timer_init(&loop, &r.deadline);
  start_deadline(r, p);
  uv_read_start(reinterpret_cast<uv_stream_t*>(&r.tcp), UvReceiver::on_alloc, UvReceiver::on_read);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  result.error = r.error;
  if (result.error.empty() && r.frames != p.frames) result.error = "libuv receiver stopped early";
  result.cpu_s = thread_cpu_seconds() - cpu0;
  return result;
}

// ---- driver --------------------------------------------------------------------------

struct RunResult {
  double seconds = 0;
  double send_cpu_s = 0;
  double receive_cpu_s = 0;
};

template <typename Send, typename Receive>
RunResult run_once(const Params& p, Send send, Receive receive) {
  std::vector<std::byte> payload(p.frame_bytes, std::byte{0x5a});
  std::vector<std::byte> destination(p.frame_bytes);
  auto [sender_fd, receiver_fd] = connected_pair();
  ThreadResult sent;
  ThreadResult received;
  const auto start = Clock::now();
  std::thread receiver([&, fd = receiver_fd] { received = receive(fd, p, destination); });
  sent = send(sender_fd, p, payload);
  receiver.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  // TcpConnection closed its fd; libuv's uv_close did too. Closing again would be a bug.
  if (!sent.error.empty()) throw std::runtime_error(sent.error);
  if (!received.error.empty()) throw std::runtime_error(received.error);
  if (destination.front() != std::byte{0x5a} || destination.back() != std::byte{0x5a}) {
    throw std::runtime_error("the payload did not arrive intact");
  }
  return {seconds, sent.cpu_s, received.cpu_s};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Streams data frames over a loopback TCP connection with the transport's epoll loop "
      "(TcpConnection) and with libuv, interleaved, and prints each one's median throughput "
      "and the sending and receiving threads' CPU per GB."};
  uint64_t total_mib = 1024;
  std::vector<uint32_t> frame_kib = {64, 512};
  int repeat = 5;
  Params p;
  app.add_option("--mib", total_mib, "MiB streamed per run")->capture_default_str();
  app.add_option("--frame-kib", frame_kib, "Frame payload sizes to try (KiB)")
      ->capture_default_str();
  app.add_option("--in-flight", p.in_flight, "Frames queued ahead of the socket")
      ->capture_default_str();
  app.add_option("--repeat", repeat, "Runs of each loop per frame size (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  std::printf(
      "# one-way stream over 127.0.0.1, %llu MiB per run, %u frames in flight, "
      "median of %d interleaved runs; cpu = sender + receiver threads\n",
      static_cast<unsigned long long>(total_mib), p.in_flight, repeat);
  std::printf("# %9s %-7s %9s %12s %12s %12s\n", "frame", "loop", "GB/s", "send s/GB", "recv s/GB",
              "cpu s/GB");
  try {
    for (uint32_t kib : frame_kib) {
      p.frame_bytes = kib << 10;
      p.frames = std::max<uint64_t>(1, (total_mib << 20) / p.frame_bytes);
      const double gb = static_cast<double>(p.frames) * p.frame_bytes / 1e9;
      std::vector<double> rate[2], send_cpu[2], recv_cpu[2];
      for (int run = 0; run < repeat; ++run) {
        for (int loop = 0; loop < 2; ++loop) {
          RunResult r =
              loop == 0 ? run_once(p, epoll_send, epoll_receive) : run_once(p, uv_send, uv_receive);
          rate[loop].push_back(gb / r.seconds);
          send_cpu[loop].push_back(r.send_cpu_s / gb);
          recv_cpu[loop].push_back(r.receive_cpu_s / gb);
        }
      }
      for (int loop = 0; loop < 2; ++loop) {
        const double s = median(send_cpu[loop]);
        const double r = median(recv_cpu[loop]);
        std::printf("  %7u KiB %-7s %9.2f %12.3f %12.3f %12.3f\n", kib,
                    loop == 0 ? "epoll" : "libuv", median(rate[loop]), s, r, s + r);
      }
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tcp_event_loop_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
