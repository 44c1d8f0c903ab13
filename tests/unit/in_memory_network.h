// An in-memory transport for plan tests: sends are delivered in pieces of random size in
// random order, and a sender's bytes are read only while its send is in flight (send_done
// comes after the last piece), so a runner that touches bytes under an in-flight send or
// mishandles early or out-of-order pieces gets wrong results.
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
    flights_.push_back(Flight{from, to, message, data, 0});
  }

  // Delivers until nothing is in flight; returns the first error a receiver reported.
  std::string run(const Deliver& deliver, const SendDone& send_done) {
    size_t deliveries = 0;
    while (!flights_.empty()) {
      if (++deliveries > 10'000'000) return "the network did not go quiet";
      const size_t pick = std::uniform_int_distribution<size_t>(0, flights_.size() - 1)(rng_);
      // deliver and send_done may post new sends: copy, then index again.
      const Flight f = flights_[pick];
      const uint64_t left = f.data.size() - f.offset;
      const uint64_t piece =
          std::min<uint64_t>(left, std::uniform_int_distribution<uint64_t>(1, 3)(rng_) * unit_ * 5);
      flights_[pick].offset += piece;
      const bool last = f.offset + piece == f.data.size();
      if (last) flights_.erase(flights_.begin() + static_cast<std::ptrdiff_t>(pick));
      std::string error =
          deliver(f.to, f.from, f.message, f.offset, f.data.subspan(f.offset, piece));
      if (!error.empty()) return "participant " + std::to_string(f.to) + ": " + error;
      if (last) send_done(f.from, f.to, f.message);
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
  };
  std::mt19937 rng_;
  uint32_t unit_;
  std::vector<Flight> flights_;
};

}  // namespace plexus::test
