// When, and to whom, this daemon opens data connections, and keeping them up. For each peer
// it is asked to connect to: one connection per rail (plan_rails), the rail's latency-class
// twin where configured, and backups across rails where a route joins them; a rail that is
// lost, or could not be opened, is dialled again with exponential backoff and jitter
// (dial_backoff.h) while the peer is (or may yet be) linked, or, for a link the engine
// waits for (paths open on first use), until its deadline; a peer none of whose rails could be
// opened is given up (Hooks::failed), at once when every address refused (no plexusd listens). The
// one place that decides which data paths exist. Owns: the peers it connects to (their addresses,
// the rails being dialled, each rail's retries and their timer, the forming deadline, the jitter's
// random generator) and what the rail plan needs (the local NICs, the latency twins, whether
// backups can be bound to their NIC). Sockets are not its own: it dials through Hooks::dial
// (PeerConnections::dial) and hears what became of a dial through dial_failed and dial_established.
// Control thread only (the libuv loop it is given); nothing here is thread-safe.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "daemon/peers/loop_timer.h"
#include "daemon/peers/rail_plan.h"
#include "daemon/peers/route_table.h"

namespace plexus::daemon {

class RailConnector {
 public:
  struct Settings {
    std::vector<LocalNic> nics;  // a rail each
    // Beside each rail (not the backups) a second connection for the latency class.
    bool latency_connections = false;
    // Longest wait between attempts to dial a rail again (the backoff doubles up to it).
    std::chrono::milliseconds reconnect_max{0};
    // The data links' grace period (--peer-grace-ms): how long a link with no path left keeps
    // its frames for one to come back. A path must then be found well within it, whoever's
    // NIC was down and however long TCP would wait to resend a lost SYN (1 s, then 3 s): a
    // linked peer's rail is dialled again with each connect given a quarter of it (at least
    // 100 ms), and waits at most an eighth of it between attempts for a grace period after
    // it was lost (the peer may have no path left, which this side cannot know) and while
    // this side's link has no path left. On the side that dials, a network back at time t
    // in that span then has a connection dialled over it by t + 3/8 of the grace (each
    // address's connect, for a rail tried over several; t + grace/8 + 100 ms below a 400 ms
    // grace). At most kMostRedialConnect per connect however long the grace. 0: neither
    // (the dialler's own limit, and reconnect_max).
    std::chrono::milliseconds grace{0};
    // Seeds the jitter of retries and first dials: each daemon its own (PeerServer uses the
    // instance id), a test a fixed one.
    uint64_t jitter_seed = 0;
  };
  using Clock = std::chrono::steady_clock;
  struct Hooks {
    // Opens a data connection to `instance` over `rail`; `dial` names the attempt in
    // dial_failed. A failure at once comes back through dial_failed before it returns.
    // `connect_within`: how long each address's connect may take (0: the dialler's own
    // limit).
    std::function<void(uint64_t instance, const Rail& rail, uint64_t dial,
                       std::chrono::milliseconds connect_within)>
        dial;
    // No data connection to `instance` could be opened: every rail failed before one was
    // authenticated (PeerServer::Callbacks::on_data_failed).
    std::function<void(uint64_t instance, const std::string& reason)> failed;
    // The kernel's routing table (RouteTable::read): a backup is dialled only while a route
    // over its NIC covers the peer's address.
    std::function<RouteTable()> routes;
    // The time; null: Clock::now. A test's own clock makes the deadlines deterministic.
    std::function<Clock::time_point()> now;
  };
  // A link the engine waits for (connect's `forming`: its first connection,
  // NodeJoins::path_wanted).
  struct Forming {
    // Until then a peer not yet linked is dialled again (with backoff) after a timeout or
    // a handshake that did not finish; it is given up once the next attempt would start
    // past it, or at once when every address refused.
    Clock::time_point deadline{};
  };

  // The longest a redial's connect is given: the dialler's own limit (PeerConnections'
  // kConnectAttemptMs, which PeerServer checks), which a long grace must not stretch.
  static constexpr std::chrono::milliseconds kMostRedialConnect{3500};

  RailConnector(uv_loop_t* loop, Settings settings, Hooks hooks);
  RailConnector(const RailConnector&) = delete;
  RailConnector& operator=(const RailConnector&) = delete;

  // The listener is up: retries are timed from now on. `backups`: sockets can be bound to a
  // NIC (PeerConnections::binds_to_nics); without, backups would only copy a rail.
  void start(bool backups);
  // Opens a data connection to `instance` on every rail (a local NIC and the peer's address
  // in its subnet; when none match, one connection to any address) not connected or being
  // connected, and with two rails or more a backup from each NIC to the peer's address on
  // the next rail. They are then kept up: lost() dials again with backoff. `forming`: a
  // communicator needs the peer (see Forming); a later deadline extends an earlier one.
  void connect(uint64_t instance, const std::vector<std::string>& addresses,
               std::optional<Forming> forming = std::nullopt);
  // The engine's path to `instance` dialled for rail `rail_key` failed: the rail is dialled
  // again (with backoff) if this side keeps it. By the key the dial had, never worked out
  // again from the path's ends: a path whose socket was reset before it learnt the peer's
  // address has none, and a NIC with two addresses has two rails of each kind ("": the peer
  // dialled it, nothing to redial). The rail is hurried for a grace period (Settings::grace).
  // `pathless`: it was the link's last path: every rail this side keeps to the peer waiting
  // for a retry is hurried too, those already backing off included, for a grace period or
  // until a rail is established or the peer's own connection accepted.
  void lost(uint64_t instance, const std::string& rail_key, bool pathless);
  // Local NIC `nic` is up again: its rails waiting for a retry are dialled now.
  void nic_up(const std::string& nic);
  // The link to `instance` is gone: its rails are no longer kept.
  void forget(uint64_t instance);

  // Dial `dial` to `instance` over rail `key` failed before it was authenticated: the rail
  // is retried while the peer is, or may yet be, linked, or (not `refused`: some address
  // did not refuse the connection or the handshake) while its forming deadline allows;
  // else the peer is given up.
  void dial_failed(uint64_t instance, const std::string& key, uint64_t dial,
                   const std::string& reason, bool refused = false);
  // Dial `dial` to `instance` over rail `key` was refused as crossed (the peer dialled this
  // node at once and keeps its own connection): not a failure; the peer is forgotten once it
  // has no dial left and no link, and its own connection comes instead.
  void dial_crossed(uint64_t instance, const std::string& key, uint64_t dial);
  // The peer's own data connection to `instance` was accepted: the link has a path, and this
  // side no longer dials for it (rails it keeps stay kept).
  void accepted(uint64_t instance);
  // Whether this side dials rails to `instance`, or keeps rails it dialled: a connection
  // from `instance` then crosses this side's own.
  bool keeps(uint64_t instance) const {
    auto it = peers_.find(instance);
    return it != peers_.end() && (it->second.linked || !it->second.dials.empty());
  }
  // A dial to `instance` over rail `key` was authenticated: the peer is linked.
  void dial_established(uint64_t instance, const std::string& key);
  // Whether rail `key` to `instance` is on its second or later attempt.
  bool redialing(uint64_t instance, const std::string& key) const;

  // Forgets every peer and closes the timer (the loop must run to finish the close).
  void close();

 private:
  struct Retry {
    int attempts = 0;
    Clock::time_point due{};
    bool scheduled = false;
    Clock::time_point hurried_until{};  // lost(): a grace period after the rail was lost
  };
  struct Dialing {
    uint64_t dial = 0;
    bool backup = false;  // a backup's failure does not replace the peer's last error
  };
  struct Peer {
    std::vector<std::string> addresses;
    bool linked = false;                   // a rail has been established since the last forget
    std::map<std::string, Dialing> dials;  // by Rail::key: the rails being dialled
    std::map<std::string, Retry> retries;  // by Rail::key
    std::string last_error;
    bool refused = false;  // the last rail to fail was refused
    // lost() said the link has no path left: its rails are hurried until then (a grace
    // period at most), or until a rail is established or the peer's connection accepted.
    Clock::time_point pathless_until{};
    std::optional<Clock::time_point> until;  // Forming::deadline, while forming
  };
  // The rails to a peer (plan_rails), without backups when they cannot be bound to a NIC.
  std::vector<Rail> rails_to(const std::vector<std::string>& addresses) const;
  // Whether `rail` can be dialled now: a backup needs a route over its NIC. `routes` is
  // read on first need, once for all the rails a caller looks at.
  bool openable(const Rail& rail, std::optional<RouteTable>& routes) const;
  void dial(uint64_t instance, const Rail& rail);
  // Whether `peer` may yet be linked: it is, or a rail is being dialled.
  static bool hopeful(const Peer& peer);
  // A peer with no hope left: dialled again while its forming deadline allows (and not
  // refused), else given up (Hooks::failed).
  void retry_or_give_up(uint64_t instance, const std::vector<std::string>& keys);
  // Exponential backoff with jitter (dial_backoff), at most retry_cap; false
  // (nothing scheduled) when the attempt would fall at or past `before`.
  bool schedule_retry(uint64_t instance, const std::string& key,
                      std::chrono::milliseconds at_least = std::chrono::milliseconds(0),
                      std::optional<Clock::time_point> before = std::nullopt);
  Clock::time_point now() const { return hooks_.now ? hooks_.now() : Clock::now(); }
  // The backoff's cap for `retry`, a rail of `peer`, at `now`: hurried_cap_ while hurried
  // (Settings::grace), else reconnect_max.
  std::chrono::milliseconds retry_cap(const Peer& peer, const Retry& retry,
                                      Clock::time_point now) const;
  void run_retries();
  void arm_timer();

  uv_loop_t* loop_;
  Settings settings_;
  Hooks hooks_;
  bool backups_ = true;
  // From Settings: the backoff's cap while hurried (an eighth of the grace; reconnect_max
  // when there is no grace, or it is not shorter: no hurry), and a linked peer's connect
  // limit (a quarter of the grace, within kLeastRedialConnect..kMostRedialConnect; 0: the
  // dialler's own).
  const std::chrono::milliseconds hurried_cap_;
  const std::chrono::milliseconds linked_connect_;
  std::map<uint64_t, Peer> peers_;
  std::mt19937_64 rng_;  // the jitter's (Settings::jitter_seed)
  // When the retry timer is due, while it is armed: a retry due later needs no new arming.
  std::optional<Clock::time_point> armed_for_;
  uint64_t dials_ = 0;                       // attempts numbered so far
  uint64_t opening_ = 0;                     // connect() is dialling this peer's rails
  std::vector<std::string> opening_failed_;  // rails of opening_ that failed at once
  LoopTimer timer_;
};

}  // namespace plexus::daemon
