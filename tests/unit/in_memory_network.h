// An in-memory transport for plan tests: sends are delivered in pieces of random size in
// random order, and a sender's bytes are read only while its send is in flight (send_done
// comes after the last piece, often much later, as a reliable channel's acknowledgement
// does), so a runner that touches bytes under an in-flight send or mishandles early or
// out-of-order pieces gets wrong results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace plexus::test {

class InMemoryNetwork {
 public:
  using Deliver = std::function<std::string(int to, int from, uint32_t message, uint64_t offset,
                                            std::span<const std::byte> data)>;
  using SendDone = std::function<void(int from, int to, uint32_t message)>;

  // Pieces are whole multiples of `unit` bytes (an element), except a message's tail.
  InMemoryNetwork(uint32_t seed, uint32_t unit) : rng_(seed), unit_(unit) {}

  void post(int from, int to, uint32_t message, std::span<const std::byte> data) {
    flights_.push_back(Flight{from, to, message, data, 0, {data.begin(), data.end()}});
  }

  // Delivers until nothing is in flight; returns the first error a receiver reported.
  std::string run(const Deliver& deliver, const SendDone& send_done) {
    size_t deliveries = 0;
    while (!flights_.empty() || !acks_.empty()) {
      if (++deliveries > 10'000'000) return "the network did not go quiet";
      // Half the time (or when nothing else moves) a random pending send_done comes in.
      if (!acks_.empty() && (flights_.empty() || rng_() % 2 == 0)) {
        const size_t a = std::uniform_int_distribution<size_t>(0, acks_.size() - 1)(rng_);
        const Flight ack = std::move(acks_[a]);
        acks_.erase(acks_.begin() + static_cast<std::ptrdiff_t>(a));
        // A reliable channel may send the bytes again until this point: they must not
        // have changed.
        if (!std::equal(ack.data.begin(), ack.data.end(), ack.posted.begin(), ack.posted.end())) {
          return "participant " + std::to_string(ack.from) + " changed the bytes of message " +
                 std::to_string(ack.message) + " to " + std::to_string(ack.to) +
                 " before its send was done";
        }
        send_done(ack.from, ack.to, ack.message);
        continue;
      }
      const size_t pick = std::uniform_int_distribution<size_t>(0, flights_.size() - 1)(rng_);
      Flight& f = flights_[pick];
      const uint64_t left = f.data.size() - f.offset;
      const uint64_t piece =
          std::min<uint64_t>(left, std::uniform_int_distribution<uint64_t>(1, 3)(rng_) * unit_ * 5);
      // deliver may post new sends (flights_ moves): take what it needs first.
      const int to = f.to;
      const int from = f.from;
      const uint32_t message = f.message;
      const uint64_t offset = f.offset;
      const std::span<const std::byte> bytes = f.data.subspan(offset, piece);
      f.offset += piece;
      if (f.offset == f.data.size()) {
        // The bytes are read: what remains is the acknowledgement, whenever it comes.
        acks_.push_back(std::move(f));
        flights_.erase(flights_.begin() + static_cast<std::ptrdiff_t>(pick));
      }
      std::string error = deliver(to, from, message, offset, bytes);
      if (!error.empty()) return "participant " + std::to_string(to) + ": " + error;
    }
    return {};
  }

 private:
  struct Flight {
    int from;
    int to;
    uint32_t message;
    std::span<const std::byte> data;
    uint64_t offset;
    std::vector<std::byte> posted;  // the bytes as posted
  };
  std::mt19937 rng_;
  uint32_t unit_;
  std::vector<Flight> flights_;
  std::vector<Flight> acks_;  // wholly delivered, send_done not yet reported
};

}  // namespace plexus::test
