#include "tools/plexusctl/models_view.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "tools/plexusctl/format.h"

namespace plexus::ctl {
namespace {

namespace control = shm::control;
using nlohmann::json;

json models_to_json(control::WeightsListReply::Reader reply) {
  json models = json::array();
  for (auto m : reply.getModels()) {
    json versions = json::array();
    for (auto v : m.getVersions()) {
      versions.push_back({{"version", v.getNumber()},
                          {"bytes", v.getBytes()},
                          {"shards", v.getShards()},
                          {"shards_in", v.getShardsIn()},
                          {"complete", v.getComplete()},
                          {"age_s", v.getAgeS()}});
    }
    models.push_back({{"name", m.getName().cStr()},
                      {"owner_uid", m.getOwnerUid()},
                      {"versions", versions},
                      {"publishes", m.getPublishes()},
                      {"pulls", m.getPulls()},
                      {"pulled_bytes", m.getPulledBytes()},
                      {"waiting_pulls", m.getWaiting()}});
  }
  return {{"held_bytes", reply.getHeldBytes()},
          {"spare_bytes", reply.getSpareBytes()},
          {"cap_bytes", reply.getCapBytes()},
          {"versions_kept", reply.getVersionsKept()},
          {"models", models}};
}

void print_models(const json& store) {
  std::printf(
      "weight store: %s held (%s spare) of a %s cap, %u complete version(s) kept per "
      "model\n",
      human_bytes(store["held_bytes"].get<uint64_t>()).c_str(),
      human_bytes(store["spare_bytes"].get<uint64_t>()).c_str(),
      human_bytes(store["cap_bytes"].get<uint64_t>()).c_str(),
      store["versions_kept"].get<unsigned>());
  if (store["models"].empty()) {
    std::printf("no models\n");
    return;
  }
  std::printf("%-24s %6s %8s %-9s %10s %7s %9s %6s %8s\n", "MODEL", "OWNER", "VERSION", "STATE",
              "BYTES", "SHARDS", "AGE", "PULLS", "WAITING");
  for (const json& m : store["models"]) {
    bool first = true;
    for (const json& v : m["versions"]) {
      const bool complete = v["complete"].get<bool>();
      const std::string shards = std::to_string(v["shards_in"].get<unsigned>()) + "/" +
                                 std::to_string(v["shards"].get<unsigned>());
      char age[32] = "-";
      if (complete) std::snprintf(age, sizeof(age), "%.1f s", v["age_s"].get<double>());
      std::printf("%-24s %6s %8llu %-9s %10s %7s %9s %6s %8s\n",
                  first ? m["name"].get<std::string>().c_str() : "",
                  first ? std::to_string(m["owner_uid"].get<unsigned>()).c_str() : "",
                  static_cast<unsigned long long>(v["version"].get<uint64_t>()),
                  complete ? "complete" : "building",
                  human_bytes(v["bytes"].get<uint64_t>()).c_str(), shards.c_str(), age,
                  first ? std::to_string(m["pulls"].get<uint64_t>()).c_str() : "",
                  first ? std::to_string(m["waiting_pulls"].get<unsigned>()).c_str() : "");
      first = false;
    }
    if (first) std::printf("%-24s (no version kept)\n", m["name"].get<std::string>().c_str());
  }
}

}  // namespace

int show_models(AdminClient& client, bool as_json) {
  json store;
  client.call([](control::ClientMessage::Builder m) { m.setWeightsList(); },
              [&](control::DaemonMessage::Reader r) {
                if (!r.isWeightsListReply()) {
                  throw Refused("plexusd answered with an unexpected reply");
                }
                store = models_to_json(r.getWeightsListReply());
              });
  if (as_json) {
    std::cout << store.dump(2) << "\n";
  } else {
    print_models(store);
  }
  return 0;
}

}  // namespace plexus::ctl
