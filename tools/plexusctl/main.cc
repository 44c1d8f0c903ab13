// plexusctl: what a node's plexusd is serving, for operators.
#include <capnp/serialize.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>

#include "clientlib/src/control_channel.h"
#include "shm/control.capnp.h"
#include "shm/framing.h"

namespace {

namespace control = plexus::shm::control;
using nlohmann::json;

constexpr int kExitDaemonUnavailable = 2;

json status_to_json(control::StatusReply::Reader status) {
  json out;
  out["version"] = status.getVersion().cStr();
  out["pid"] = status.getPid();
  out["uptime_ms"] = status.getUptimeMs();
  out["socket"] = status.getSocketPath().cStr();
  out["workers"] = status.getWorkers();
  out["reduce_isa"] = status.getReduceIsa().cStr();
  out["ops_completed"] = status.getOpsCompleted();
  out["bad_entries"] = status.getBadEntries();
  out["bad_messages"] = status.getBadMessages();
  out["sessions"] = json::array();
  for (auto s : status.getSessions()) {
    out["sessions"].push_back({{"id", s.getId()},
                               {"pid", s.getPid()},
                               {"uid", s.getUid()},
                               {"role", s.getRole() == control::Role::RANK ? "rank" : "admin"},
                               {"process", s.getProcessName().cStr()},
                               {"pool_bytes", s.getPoolBytes()},
                               {"comms", s.getComms()},
                               {"ops_submitted", s.getOpsSubmitted()},
                               {"bad_entries", s.getBadEntries()}});
  }
  out["comms"] = json::array();
  for (auto c : status.getComms()) {
    json ranks = json::array();
    for (auto r : c.getRanks()) {
      ranks.push_back({{"rank", r.getRank()}, {"pid", r.getPid()}, {"session", r.getSessionId()}});
    }
    out["comms"].push_back({{"id", c.getTokenPrefix().cStr()},
                            {"nranks", c.getNranks()},
                            {"state", c.getState().cStr()},
                            {"broken_reason", c.getBrokenReason().cStr()},
                            {"ops_completed", c.getOpsCompleted()},
                            {"bytes_moved", c.getBytesMoved()},
                            {"ranks", ranks}});
  }
  return out;
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

void print_status(const json& s) {
  const uint64_t up_s = s["uptime_ms"].get<uint64_t>() / 1000;
  size_t ranks = 0;
  for (const auto& session : s["sessions"]) ranks += session["role"] == "rank" ? 1 : 0;
  std::printf("plexusd %s  pid %u  up %llus  socket %s\n", s["version"].get<std::string>().c_str(),
              s["pid"].get<unsigned>(), static_cast<unsigned long long>(up_s),
              s["socket"].get<std::string>().c_str());
  std::printf("workers %u (+ engine thread), reduce kernels %s\n", s["workers"].get<unsigned>(),
              s["reduce_isa"].get<std::string>().c_str());
  std::printf(
      "rank sessions %zu, communicators %zu, ops completed %llu, bad ring entries %llu, "
      "bad control messages %llu\n",
      ranks, s["comms"].size(), static_cast<unsigned long long>(s["ops_completed"].get<uint64_t>()),
      static_cast<unsigned long long>(s["bad_entries"].get<uint64_t>()),
      static_cast<unsigned long long>(s["bad_messages"].get<uint64_t>()));
  if (ranks == 0) return;
  std::printf("\n%-8s %-8s %-6s %-16s %10s %6s %12s %8s\n", "SESSION", "PID", "UID", "PROCESS",
              "POOL", "COMMS", "OPS", "BAD");
  for (const auto& x : s["sessions"]) {
    if (x["role"] != "rank") continue;
    std::printf("%-8llu %-8d %-6u %-16s %10s %6u %12llu %8llu\n",
                static_cast<unsigned long long>(x["id"].get<uint64_t>()), x["pid"].get<int>(),
                x["uid"].get<unsigned>(), x["process"].get<std::string>().c_str(),
                human_bytes(x["pool_bytes"].get<uint64_t>()).c_str(), x["comms"].get<unsigned>(),
                static_cast<unsigned long long>(x["ops_submitted"].get<uint64_t>()),
                static_cast<unsigned long long>(x["bad_entries"].get<uint64_t>()));
  }
}

void print_comms(const json& s) {
  if (s["comms"].empty()) {
    std::printf("no communicators\n");
    return;
  }
  std::printf("%-10s %6s %-7s %12s %12s  %s\n", "COMM", "RANKS", "STATE", "OPS", "MOVED",
              "RANK:PID");
  for (const auto& c : s["comms"]) {
    std::string members;
    for (const auto& r : c["ranks"]) {
      if (!members.empty()) members += " ";
      members +=
          std::to_string(r["rank"].get<unsigned>()) + ":" + std::to_string(r["pid"].get<int>());
    }
    std::printf("%-10s %6u %-7s %12llu %12s  %s\n", c["id"].get<std::string>().c_str(),
                c["nranks"].get<unsigned>(), c["state"].get<std::string>().c_str(),
                static_cast<unsigned long long>(c["ops_completed"].get<uint64_t>()),
                human_bytes(c["bytes_moved"].get<uint64_t>()).c_str(), members.c_str());
    if (c["state"] == "broken") {
      std::printf("           reason: %s\n", c["broken_reason"].get<std::string>().c_str());
    }
  }
}

json recent_to_json(control::WindowStats::Reader w) {
  return {{"seconds", w.getSeconds()},
          {"busy_windows", w.getBusyWindows()},
          {"bytes_out", w.getBytesOut()},
          {"bytes_in", w.getBytesIn()},
          {"resent_bytes", w.getResentBytes()},
          {"errors", w.getErrors()},
          {"busy_out_bytes_per_s", w.getBusyOutBytesPerS()},
          {"latency_samples", w.getLatencySamples()},
          {"latency_p50_us", w.getLatencyP50Us()},
          {"latency_p99_us", w.getLatencyP99Us()},
          {"latency_max_us", w.getLatencyMaxUs()}};
}

json links_to_json(control::LinksReply::Reader links) {
  json out;
  out["telemetry_window_us"] = links.getTelemetryWindowUs();
  out["nic_info"] = json::array();
  for (auto n : links.getNicInfo()) {
    json nic = {{"name", n.getName().cStr()},         {"address", n.getAddress().cStr()},
                {"state", n.getState().cStr()},       {"speed_mbps", n.getSpeedMbps()},
                {"drained", n.getDrained()},          {"paths", n.getPaths()},
                {"bytes_out", n.getBytesOut()},       {"bytes_in", n.getBytesIn()},
                {"resent_bytes", n.getResentBytes()}, {"failures", n.getFailures()}};
    if (n.getHasRecent()) nic["recent"] = recent_to_json(n.getRecent());
    out["nic_info"].push_back(nic);
  }
  out["nics"] = json::array();
  for (auto n : links.getNics()) out["nics"].push_back(n.cStr());
  out["drained"] = json::array();
  for (auto n : links.getDrained()) out["drained"].push_back(n.cStr());
  out["peers"] = json::array();
  for (auto p : links.getPeers()) {
    json paths = json::array();
    for (auto path : p.getPaths()) {
      json x = {{"nic", path.getNic().cStr()},
                {"local", path.getLocal().cStr()},
                {"remote", path.getRemote().cStr()},
                {"state", path.getState().cStr()},
                {"bytes_sent", path.getBytesSent()},
                {"bytes_received", path.getBytesReceived()},
                {"rate_bytes_per_s", path.getRateBytesPerS()}};
      if (path.getHasRecent()) x["recent"] = recent_to_json(path.getRecent());
      paths.push_back(x);
    }
    out["peers"].push_back({{"node", p.getNode().cStr()},
                            {"instance", p.getInstance()},
                            {"acks", p.getAcks()},
                            {"frames_sent", p.getFramesSent()},
                            {"frames_resent", p.getFramesResent()},
                            {"bytes_resent", p.getBytesResent()},
                            {"duplicates_dropped", p.getDuplicatesDropped()},
                            {"path_failures", p.getPathFailures()},
                            {"failbacks", p.getFailbacks()},
                            {"down_for_ms", p.getDownForMs()},
                            {"paths", paths}});
  }
  return out;
}

// "120 us", "3.4 ms", "1.20 s"
std::string human_us(double us) {
  char text[32];
  if (us < 1000) {
    std::snprintf(text, sizeof(text), "%.0f us", us);
  } else if (us < 1e6) {
    std::snprintf(text, sizeof(text), "%.1f ms", us / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.2f s", us / 1e6);
  }
  return text;
}

void print_nics(const json& links) {
  const unsigned window_us = links["telemetry_window_us"].get<unsigned>();
  if (window_us == 0) {
    std::printf("telemetry off (plexusd --telemetry off): no rates or latency\n");
  } else {
    std::printf("telemetry: %u us windows; rates and chunk latency over the last second\n",
                window_us);
  }
  if (links["nic_info"].empty()) {
    std::printf("no NICs serve peer daemons (no --peer-listen)\n");
    return;
  }
  std::printf("%-10s %-8s %-9s %-16s %5s %12s %12s %19s %8s %10s\n", "NIC", "STATE", "SPEED",
              "ADDRESS", "PATHS", "OUT/s", "IN/s", "LATENCY p50/p99", "FAILURES", "RESENT");
  for (const auto& n : links["nic_info"]) {
    const unsigned speed = n["speed_mbps"].get<unsigned>();
    const std::string speed_text = speed == 0          ? "?"
                                   : speed % 1000 == 0 ? std::to_string(speed / 1000) + " Gb/s"
                                                       : std::to_string(speed) + " Mb/s";
    std::string out_rate = "-", in_rate = "-", latency = "-";
    if (n.contains("recent")) {
      const json& r = n["recent"];
      const double seconds = std::max(r["seconds"].get<double>(), 1e-9);
      out_rate = human_bytes(static_cast<uint64_t>(r["bytes_out"].get<double>() / seconds)) + "/s";
      in_rate = human_bytes(static_cast<uint64_t>(r["bytes_in"].get<double>() / seconds)) + "/s";
      if (r["latency_samples"].get<uint64_t>() > 0) {
        latency = human_us(r["latency_p50_us"].get<double>()) + " / " +
                  human_us(r["latency_p99_us"].get<double>());
      }
    }
    const std::string state =
        n["state"].get<std::string>() + (n["drained"].get<bool>() ? ",drained" : "");
    std::printf("%-10s %-8s %-9s %-16s %5u %12s %12s %19s %8llu %10s\n",
                n["name"].get<std::string>().c_str(), state.c_str(), speed_text.c_str(),
                n["address"].get<std::string>().c_str(), n["paths"].get<unsigned>(),
                out_rate.c_str(), in_rate.c_str(), latency.c_str(),
                static_cast<unsigned long long>(n["failures"].get<uint64_t>()),
                human_bytes(n["resent_bytes"].get<uint64_t>()).c_str());
  }
}

void print_paths(const json& links) {
  std::string nics;
  for (const auto& n : links["nics"]) nics += (nics.empty() ? "" : ", ") + n.get<std::string>();
  std::string drained;
  for (const auto& n : links["drained"])
    drained += (drained.empty() ? "" : ", ") + n.get<std::string>();
  std::printf("NICs: %s%s%s\n", nics.empty() ? "none (no --peer-listen)" : nics.c_str(),
              drained.empty() ? "" : "; drained: ", drained.c_str());
  if (links["peers"].empty()) {
    std::printf("no data links to peer daemons\n");
    return;
  }
  for (const auto& p : links["peers"]) {
    std::printf("\nnode %s: %zu path(s), acks %s, failures %llu, failbacks %llu, resent %s",
                p["node"].get<std::string>().c_str(), p["paths"].size(),
                p["acks"].get<bool>() ? "on" : "off",
                static_cast<unsigned long long>(p["path_failures"].get<uint64_t>()),
                static_cast<unsigned long long>(p["failbacks"].get<uint64_t>()),
                human_bytes(p["bytes_resent"].get<uint64_t>()).c_str());
    const int64_t down = p["down_for_ms"].get<int64_t>();
    if (down >= 0) std::printf(", NO PATH for %lld ms", static_cast<long long>(down));
    std::printf("\n%-10s %-10s %-22s %-22s %10s %10s %12s\n", "NIC", "STATE", "LOCAL", "REMOTE",
                "SENT", "RECEIVED", "RATE");
    for (const auto& x : p["paths"]) {
      const double rate = x["rate_bytes_per_s"].get<double>();
      const std::string rate_text =
          rate > 0 ? human_bytes(static_cast<uint64_t>(rate)) + "/s" : std::string("-");
      std::printf("%-10s %-10s %-22s %-22s %10s %10s %12s\n", x["nic"].get<std::string>().c_str(),
                  x["state"].get<std::string>().c_str(), x["local"].get<std::string>().c_str(),
                  x["remote"].get<std::string>().c_str(),
                  human_bytes(x["bytes_sent"].get<uint64_t>()).c_str(),
                  human_bytes(x["bytes_received"].get<uint64_t>()).c_str(), rate_text.c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"plexusctl: inspect the node's plexusd, and drain its NICs"};
  std::string socket_path;
  bool as_json = false;
  app.add_option("--socket", socket_path,
                 "plexusd's socket (default: $PLEXUS_SOCKET, else the daemon's default path)");
  app.add_flag("--json", as_json, "Print JSON instead of a table");
  app.require_subcommand(1);
  auto* status_cmd = app.add_subcommand("status", "Daemon summary and its rank sessions");
  auto* comms_cmd = app.add_subcommand("comms", "Communicators, their ranks and state");
  auto* paths_cmd = app.add_subcommand(
      "paths",
      "Data links to peer daemons: each path's NIC, state, bytes, measured rate, and "
      "each peer's failovers and resent bytes");
  auto* nics_cmd = app.add_subcommand(
      "nics",
      "The NICs that serve peer daemons: state, speed, paths, data rates and chunk latency "
      "over the last second, failures and resent bytes since the daemon started");
  auto* nic_cmd = app.add_subcommand(
      "nic",
      "drain NAME: move traffic to peers off a NIC (no new frames on it, in both "
      "directions; nothing is resent); undrain NAME: take it back. Needs root or "
      "plexusd's own user");
  nic_cmd->require_subcommand(1);
  std::string nic_name;
  auto* drain_cmd = nic_cmd->add_subcommand("drain", "Move traffic off NIC NAME");
  auto* undrain_cmd = nic_cmd->add_subcommand("undrain", "Let NIC NAME carry traffic again");
  for (auto* sub : {drain_cmd, undrain_cmd}) {
    sub->add_option("NAME", nic_name, "The interface, as in plexusctl paths")->required();
  }
  for (auto* sub : {status_cmd, comms_cmd, paths_cmd, nics_cmd, nic_cmd, drain_cmd, undrain_cmd}) {
    sub->add_flag("--json", as_json, "Print JSON instead of a table");
  }
  CLI11_PARSE(app, argc, argv);
  if (socket_path.empty()) socket_path = plexus::shm::default_socket_path();

  json result;
  try {
    plexus::client::ControlChannel channel(socket_path, 0);
    capnp::MallocMessageBuilder hello_message;
    auto hello = hello_message.initRoot<control::ClientMessage>().initHello();
    hello.setProtocolVersion(plexus::shm::kProtocolVersion);
    hello.setRole(control::Role::ADMIN);
    hello.setProcessName("plexusctl");
    channel.call(hello_message);
    capnp::MallocMessageBuilder request;
    auto message = request.initRoot<control::ClientMessage>();
    if (paths_cmd->parsed() || nics_cmd->parsed()) {
      message.setLinks();
    } else if (nic_cmd->parsed()) {
      auto drain = message.initNicDrain();
      drain.setNic(nic_name);
      drain.setDrained(drain_cmd->parsed());
    } else {
      message.setStatus();
    }
    auto reply = channel.call(request);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::shm::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (root.isError()) {
      std::fprintf(stderr, "plexusctl: plexusd on %s refused: %s\n", socket_path.c_str(),
                   root.getError().getMessage().cStr());
      return 1;
    }
    if (root.isStatusReply()) {
      result = status_to_json(root.getStatusReply());
    } else if (root.isLinksReply()) {
      result = links_to_json(root.getLinksReply());
    } else if (root.isNicDrainReply()) {
      result = {{"nic", nic_name},
                {"drained", drain_cmd->parsed()},
                {"paths", root.getNicDrainReply().getPaths()}};
    } else {
      std::fprintf(stderr, "plexusctl: plexusd on %s answered with an unexpected reply\n",
                   socket_path.c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plexusctl: %s\n", e.what());
    return kExitDaemonUnavailable;
  }
  if (as_json) {
    const json& shown = comms_cmd->parsed()  ? result["comms"]
                        : nics_cmd->parsed() ? result["nic_info"]
                                             : result;
    std::cout << shown.dump(2) << "\n";
  } else if (comms_cmd->parsed()) {
    print_comms(result);
  } else if (paths_cmd->parsed()) {
    print_paths(result);
  } else if (nics_cmd->parsed()) {
    print_nics(result);
  } else if (nic_cmd->parsed()) {
    std::printf("NIC %s %s (%u path(s) over it now)\n", nic_name.c_str(),
                drain_cmd->parsed() ? "drained" : "undrained", result["paths"].get<unsigned>());
  } else {
    print_status(result);
  }
  return 0;
}
