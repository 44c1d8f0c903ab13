// One end of a PeerLinks pair with its MessageSender (tests/unit/peer_links_pair.h joins two):
// what arrived (every frame's header, the last payload as text) and which links were lost
// and why. `reliable`: the channels' acknowledgements (ReliableChannel::Settings::reliable).
// `retirement`: when idle links close their paths (none by default); with it on, paths count
// as idle after 20 ms rather than a second.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "daemon/links/message_sender.h"
#include "tests/unit/peer_links_pair.h"
#include "transports/wire/frame_views.h"

namespace plexus::test {

struct SenderSide {
  static constexpr uint32_t kChunk = 64 * 1024;
  static constexpr daemon::LinkRetirement kNoRetirement{.idle_close = std::chrono::milliseconds(0),
                                                        .max_open = 0};
  static transports::ReliableChannel::Settings channel(bool reliable, bool quick_idle = false) {
    transports::ReliableChannel::Settings s;
    s.reliable = reliable;
    if (quick_idle) {
      s.idle_after = std::chrono::milliseconds(20);
      s.heartbeat_interval = std::chrono::milliseconds(10);
      s.idle_heartbeat_interval = std::chrono::milliseconds(10);
      s.path_timeout = std::chrono::seconds(2);  // a stalled test process fails no path
    }
    return s;
  }

  explicit SenderSide(bool reliable = true, daemon::LinkRetirement retirement = kNoRetirement)
      : nics(daemon::NicEvents::Hooks{.nic_down = [](const std::string&, const std::string&) {},
                                      .nic_up = nullptr}),
        links(daemon::LinksHandler{
                  .on_frame =
                      [this](uint64_t, const transports::wire::DataFrameHeader& h,
                             std::span<const std::byte> payload) {
                        frames.push_back(h);
                        text.assign(reinterpret_cast<const char*>(payload.data()), payload.size());
                        return std::string();
                      },
                  .on_lost =
                      [this](uint64_t peer, const std::string&, const std::string& why) {
                        lost.push_back(std::to_string(peer) + ": " + why);
                      },
                  .on_retired = [this](uint64_t peer) { retired.push_back(peer); },
                  .on_wanted =
                      [this](uint64_t peer, const std::vector<std::string>& addresses) {
                        wanted.emplace_back(peer, addresses);
                      }},
              daemon::PeerLinks::Hooks{.peer_rate = [](uint64_t, uint64_t) {},
                                       .nic_readable = [] {},
                                       .peer_lost = [](uint64_t) {}},
              daemon::PeerLinks::Parts{
                  .nics = &nics, .flow_policies = &policies, .published = &published},
              kChunk,
              channel(reliable, retirement.idle_close.count() != 0 || retirement.max_open != 0),
              retirement),
        sender(links, kChunk, channel(reliable)) {}
  daemon::NicEvents nics;
  transports::FlowPolicies policies;
  daemon::LinksSnapshot published{daemon::LinksSnapshot::Telemetry{}};
  daemon::PeerLinks links;
  daemon::MessageSender sender;
  std::vector<transports::wire::DataFrameHeader> frames;
  std::string text;               // the last frame's payload
  std::vector<std::string> lost;  // "peer: why", per link lost
  std::vector<uint64_t> retired;  // links that closed their paths while idle
  std::vector<std::pair<uint64_t, std::vector<std::string>>> wanted;  // reopened (on_wanted)
};

}  // namespace plexus::test
