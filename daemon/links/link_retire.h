// Where one link is in closing its paths while idle, and what it does next: the decisions
// of the idle-link close protocol, with no I/O (PeerLinks acts on them:
// peer_links_retire.cc says the protocol whole).
//
// Owns the link's retire state: open, asked, agreed or dormant; since when it has been quiet;
// the ids of its own latest ask and of the peer's ask it agreed to; what it had sent and
// how many paths it had when it asked. Engine thread only, as PeerLinks.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace plexus::daemon {

// What PeerLinks knows of a link when it asks LinkRetire.
struct RetireFacts {
  bool quiet = false;       // nothing queued, unacknowledged or being written
  bool paths_idle = false;  // and every path idle by its liveness
  // Not pinned, not opening, no op under way with the peer, and without acknowledgements a
  // single live path.
  bool may_retire = false;
  uint64_t frames_sent = 0;  // the channel's counter
  uint64_t paths_added = 0;  // ever
  uint64_t own_incarnation = 0;
  uint64_t peer_incarnation = 0;  // 0: not heard yet
};

class LinkRetire {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  enum class State : uint8_t {
    kOpen,     // in use, or may be
    kAsked,    // this side sent kRetire and waits for the answer (it still sends)
    kAgreed,   // this side agreed: its channel is held until the asker answers
    kDormant,  // no path; the channel waits for the next frame to open one
  };
  // What PeerLinks does next.
  enum class Step : uint8_t {
    kNone,
    kAsk,       // send kRetire with ask_id()
    kAgree,     // hold the channel, mark the paths, send kRetireAgreed
    kRefuse,    // send kRetireRefused: this side refuses the peer's ask
    kCallOff,   // send kRetireRefused: this side calls its own ask off (after an agreement)
    kClose,     // hold the channel and close every path
    kUnretire,  // back to open: the paths count as paths again, the held frames go
  };
  // Far longer than a side takes to answer (its next poll); only a lost answer waits it out:
  // an agreement then lapses as if called off, an ask as if refused.
  static constexpr auto kAgreedLimit = std::chrono::seconds(10);
  static constexpr auto kAskLimit = kAgreedLimit;

  // kRetireRefused's `to` field: which ask a refusal is about.
  static constexpr uint64_t kRefusesYourAsk = 1;
  static constexpr uint64_t kCallsOffMyAsk = 2;

  State state() const { return state_; }
  bool open() const { return state_ == State::kOpen || state_ == State::kAsked; }
  uint64_t ask_id() const { return ask_id_; }
  std::optional<TimePoint> quiet_since() const { return quiet_since_; }
  // Whether the least-recently-busy cap may ask it now.
  bool askable(TimePoint now) const {
    return state_ == State::kOpen && quiet_since_ && now >= next_ask_;
  }

  // After the link's tick: notes since when it has been quiet; kAsk once that is
  // `idle_close` ago (0: never for idleness), kUnretire once an agreement lapsed.
  Step tick(const RetireFacts& facts, TimePoint now, std::chrono::milliseconds idle_close);
  // This side sends kRetire now (tick's kAsk, or the cap), having sent `frames_sent` and
  // added `paths_added` paths so far (RetireFacts'): the ask's id is ask_id().
  void ask(uint64_t frames_sent, uint64_t paths_added, TimePoint now);
  // The peer's kRetire `id`. `never`: this daemon closes no link (refuses all).
  Step peer_asked(const RetireFacts& facts, uint64_t id, bool never, TimePoint now);
  // The peer agreed to ask `id`.
  Step peer_agreed(const RetireFacts& facts, uint64_t id);
  // The peer refused this side's ask `id`.
  Step peer_refused(uint64_t id, TimePoint now, std::chrono::milliseconds idle_close);
  // The peer called off its ask `id`, which this side agreed to.
  Step peer_called_off(uint64_t id);
  // A path failed (not by agreement): an ask's answer may be lost with it; kCallOff (for
  // ask_id()) when this side was asking, so that a peer that agreed lets its frames go.
  Step path_failed();
  // The link was used, or a path opened: quiet from scratch.
  void used() { quiet_since_.reset(); }
  void unretired();
  void dormant();
  void reopened();  // dormant -> open (wanted, or a path came)

 private:
  State state_ = State::kOpen;
  std::optional<TimePoint> quiet_since_;  // as of the last tick
  TimePoint next_ask_{};                  // refused: not asked again before this
  uint64_t ask_id_ = 0;
  uint64_t agreed_id_ = 0;
  uint64_t sent_at_ask_ = 0;   // more sent since refuses the close
  uint64_t paths_at_ask_ = 0;  // a path added since refuses it
  TimePoint agreed_at_{};
  TimePoint asked_at_{};
};

}  // namespace plexus::daemon
