#include "tools/plexusctl/node_view.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace plexus::ctl {
namespace {

namespace control = shm::control;
using nlohmann::json;

constexpr auto kDrainPoll = std::chrono::milliseconds(500);

json texts(capnp::List<capnp::Text>::Reader list) {
  json out = json::array();
  for (auto t : list) out.push_back(t.cStr());
  return out;
}

json drain_state(AdminClient& client, DrainAction action) {
  json state;
  client.call(
      [&](control::ClientMessage::Builder m) {
        auto drain = m.initNodeDrain();
        drain.setUndrain(action == DrainAction::kUndrain);
        drain.setQuery(action == DrainAction::kQuery);
      },
      [&](control::DaemonMessage::Reader r) {
        if (!r.isNodeDrainReply()) throw Refused("plexusd answered with an unexpected reply");
        auto s = r.getNodeDrainReply();
        state = {{"draining", s.getDraining()},
                 {"comms", s.getComms()},
                 {"ranks", s.getRanks()},
                 {"jobs", texts(s.getJobs())},
                 {"safe_to_stop", s.getSafeToStop()},
                 {"rank_sessions", s.getRankSessions()},
                 {"forming", s.getForming()}};
      });
  return state;
}

std::string describe(const json& s) {
  if (!s["draining"].get<bool>()) {
    return "not draining: new communicators are admitted (" +
           std::to_string(s["comms"].get<unsigned>()) + " served)";
  }
  if (s["safe_to_stop"].get<bool>()) {
    const unsigned connected = s["rank_sessions"].get<unsigned>();
    return "drained: no communicator left; safe to stop plexusd" +
           (connected == 0 ? std::string()
                           : " (" + std::to_string(connected) +
                                 " rank process(es) still connected with no communicator: "
                                 "their next call would find the daemon gone)");
  }
  std::string jobs;
  for (const auto& j : s["jobs"]) jobs += (jobs.empty() ? "" : ", ") + j.get<std::string>();
  return "draining: " + std::to_string(s["comms"].get<unsigned>()) + " communicator(s) with " +
         std::to_string(s["ranks"].get<unsigned>()) + " rank(s) here still running" +
         (jobs.empty() ? std::string() : " (jobs: " + jobs + ")") +
         (s["forming"].get<bool>() ? "; communicators admitted before the drain still forming"
                                   : "");
}

}  // namespace

int show_config(AdminClient& client, bool reload, bool as_json) {
  json out;
  if (reload) {
    client.call([](control::ClientMessage::Builder m) { m.setConfigReload(); },
                [&](control::DaemonMessage::Reader r) {
                  if (!r.isConfigReloadReply())
                    throw Refused("plexusd answered with an unexpected reply");
                  auto reply = r.getConfigReloadReply();
                  out = {{"applied", texts(reply.getApplied())},
                         {"restart_needed", texts(reply.getRestartNeeded())}};
                });
    if (as_json) {
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    if (out["applied"].empty() && out["restart_needed"].empty())
      std::printf("config read again: nothing changed\n");
    for (const auto& line : out["applied"])
      std::printf("applied: %s\n", line.get<std::string>().c_str());
    for (const auto& line : out["restart_needed"]) {
      std::printf("needs a restart (old value still in use): %s\n",
                  line.get<std::string>().c_str());
    }
    return 0;
  }
  client.call([](control::ClientMessage::Builder m) { m.setConfigShow(); },
              [&](control::DaemonMessage::Reader r) {
                if (!r.isConfigShowReply())
                  throw Refused("plexusd answered with an unexpected reply");
                auto reply = r.getConfigShowReply();
                out = {{"text", reply.getText().cStr()},
                       {"file", reply.getFile().cStr()},
                       {"restart_needed", texts(reply.getRestartNeeded())}};
              });
  if (as_json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("# plexusd's settings in use%s\n",
              out["file"].get<std::string>().empty()
                  ? " (no config file)"
                  : (" (config file " + out["file"].get<std::string>() + ")").c_str());
  for (const auto& line : out["restart_needed"]) {
    std::printf("# read from the file, waiting for a restart: %s\n",
                line.get<std::string>().c_str());
  }
  std::fputs(out["text"].get<std::string>().c_str(), stdout);
  return 0;
}

int node_drain(AdminClient& client, DrainAction action, double wait_s, bool as_json) {
  json state = drain_state(client, action);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  std::string last;
  for (;;) {
    const std::string line = describe(state);
    if (line != last) {  // progress: a line when something changed
      if (as_json) {
        std::cout << state.dump() << "\n";
      } else {
        std::printf("%s\n", line.c_str());
      }
    }
    std::fflush(stdout);
    last = line;
    if (wait_s <= 0 || state["safe_to_stop"].get<bool>()) break;
    if (!state["draining"].get<bool>()) {
      // Undrained meanwhile (another admin): this node is not to be stopped.
      std::fprintf(stderr,
                   "plexusctl: the node was undrained while waiting; it is not safe to "
                   "stop\n");
      return 1;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::fprintf(stderr, "plexusctl: %g s passed and the node is not drained yet\n", wait_s);
      return 1;
    }
    std::this_thread::sleep_for(kDrainPoll);
    state = drain_state(client, DrainAction::kQuery);
  }
  return 0;
}

}  // namespace plexus::ctl
