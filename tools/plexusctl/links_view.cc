#include "tools/plexusctl/links_view.h"

#include <algorithm>
#include <cstdio>

#include "tools/plexusctl/format.h"

namespace plexus::ctl {
namespace {

namespace control = shm::control;

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

}  // namespace

json links_to_json(control::LinksReply::Reader links) {
  json out;
  out["telemetry_window_us"] = links.getTelemetryWindowUs();
  out["nic_info"] = json::array();
  for (auto n : links.getNicInfo()) {
    json nic = {{"name", n.getName().cStr()},
                {"address", n.getAddress().cStr()},
                {"state", n.getState().cStr()},
                {"speed_mbps", n.getSpeedMbps()},
                {"drained", n.getDrained()},
                {"paths", n.getPaths()},
                {"transports", n.getTransports().cStr()},
                {"bytes_out", n.getBytesOut()},
                {"bytes_in", n.getBytesIn()},
                {"resent_bytes", n.getResentBytes()},
                {"failures", n.getFailures()}};
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
                {"transport", path.getTransport().cStr()},
                {"local", path.getLocal().cStr()},
                {"remote", path.getRemote().cStr()},
                {"state", path.getState().cStr()},
                {"bytes_sent", path.getBytesSent()},
                {"bytes_received", path.getBytesReceived()},
                {"rate_bytes_per_s", path.getRateBytesPerS()},
                {"delivery_bytes_per_s", path.getDeliveryBytesPerS()},
                {"delivery_app_limited", path.getDeliveryAppLimited()},
                {"rtt_us", path.getRttUs()},
                {"kernel_unsent_bytes", path.getKernelUnsentBytes()},
                {"class", path.getLatencyClass() ? "latency" : "bulk"}};
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
                            {"dormant", p.getDormant()},
                            {"paths", paths}});
  }
  return out;
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
  std::printf("%-10s %-8s %-9s %-16s %5s %-9s %12s %12s %19s %8s %10s\n", "NIC", "STATE", "SPEED",
              "ADDRESS", "PATHS", "TRANSPORT", "OUT/s", "IN/s", "LATENCY p50/p99", "FAILURES",
              "RESENT");
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
    const std::string transports = n["transports"].get<std::string>();
    std::printf("%-10s %-8s %-9s %-16s %5u %-9s %12s %12s %19s %8llu %10s\n",
                n["name"].get<std::string>().c_str(), state.c_str(), speed_text.c_str(),
                n["address"].get<std::string>().c_str(), n["paths"].get<unsigned>(),
                transports.empty() ? "-" : transports.c_str(), out_rate.c_str(), in_rate.c_str(),
                latency.c_str(), static_cast<unsigned long long>(n["failures"].get<uint64_t>()),
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
    if (p.value("dormant", false)) std::printf(", dormant (closed while idle; opens on next use)");
    std::printf("\n%-10s %-9s %-10s %-22s %-22s %10s %10s %12s  %s\n", "NIC", "TRANSPORT", "STATE",
                "LOCAL", "REMOTE", "SENT", "RECEIVED", "RATE", "CLASS");
    for (const auto& x : p["paths"]) {
      const double rate = x["rate_bytes_per_s"].get<double>();
      const std::string rate_text =
          rate > 0 ? human_bytes(static_cast<uint64_t>(rate)) + "/s" : std::string("-");
      const std::string transport = x["transport"].get<std::string>();
      std::printf("%-10s %-9s %-10s %-22s %-22s %10s %10s %12s  %s\n",
                  x["nic"].get<std::string>().c_str(), transport.empty() ? "-" : transport.c_str(),
                  x["state"].get<std::string>().c_str(), x["local"].get<std::string>().c_str(),
                  x["remote"].get<std::string>().c_str(),
                  human_bytes(x["bytes_sent"].get<uint64_t>()).c_str(),
                  human_bytes(x["bytes_received"].get<uint64_t>()).c_str(), rate_text.c_str(),
                  x["class"].get<std::string>().c_str());
    }
  }
}

}  // namespace plexus::ctl
