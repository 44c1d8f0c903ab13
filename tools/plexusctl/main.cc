// plexusctl: what a node's plexusd is serving, for operators.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "shm/framing.h"
#include "tools/plexusctl/admin_client.h"
#include "tools/plexusctl/events_view.h"
#include "tools/plexusctl/links_view.h"
#include "tools/plexusctl/models_view.h"
#include "tools/plexusctl/node_view.h"
#include "tools/plexusctl/ops_view.h"
#include "tools/plexusctl/status_view.h"
#include "tools/plexusctl/top_view.h"

namespace {

namespace control = plexus::shm::control;
using nlohmann::json;
using plexus::ctl::AdminClient;

constexpr int kExitDaemonUnavailable = 2;
constexpr auto kFollowInterval = std::chrono::milliseconds(250);

struct EventsOptions {
  bool follow = false;
  double for_seconds = 0;  // with follow: stop after this long (0: until interrupted)
  uint32_t last = 50;      // without follow: the newest this many
};

// Prints events; with follow, keeps asking for newer ones.
void show_events(AdminClient& client, const EventsOptions& options, bool as_json) {
  // The newest `last`: find where the log ends (asking for what follows a number past
  // it), then page from there.
  uint64_t newest = 0;
  client.call(
      [](control::ClientMessage::Builder m) { m.initEvents().setAfter(UINT64_MAX); },
      [&](control::DaemonMessage::Reader r) { newest = r.getEventsReply().getNextAfter(); });
  uint64_t after = newest > options.last ? newest - options.last : 0;
  if (!as_json) plexus::ctl::print_events_header();
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options.for_seconds);
  for (;;) {
    size_t got = 0;
    client.call(
        [&](control::ClientMessage::Builder m) {
          auto request = m.initEvents();
          request.setAfter(after);
          request.setMax(512);
        },
        [&](control::DaemonMessage::Reader r) {
          auto page = r.getEventsReply();
          if (page.getMissed() > 0 && !as_json) {
            std::printf("(%llu older events are no longer in memory; see plexusd --events-file)\n",
                        static_cast<unsigned long long>(page.getMissed()));
          }
          for (auto line : page.getLines()) plexus::ctl::print_event(line.cStr(), as_json);
          got = page.getLines().size();
          after = page.getNextAfter();
        });
    std::fflush(stdout);
    if (got == 512) continue;  // more waiting
    if (!options.follow) return;
    if (options.for_seconds > 0 && std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(kFollowInterval);
  }
}

struct TopOptions {
  double interval_s = 1.0;
  uint32_t iterations = 0;  // 0: until interrupted
};

// The three reports one frame of top needs.
void fetch_top(AdminClient& client, json& status, json& links, json& ops) {
  client.call([](control::ClientMessage::Builder m) { m.setStatus(); },
              [&](control::DaemonMessage::Reader r) {
                status = plexus::ctl::status_to_json(r.getStatusReply());
              });
  client.call([](control::ClientMessage::Builder m) { m.setLinks(); },
              [&](control::DaemonMessage::Reader r) {
                links = plexus::ctl::links_to_json(r.getLinksReply());
              });
  client.call(
      [](control::ClientMessage::Builder m) { m.setOps(); },
      [&](control::DaemonMessage::Reader r) { ops = plexus::ctl::ops_to_json(r.getOpsReply()); });
}

void show_top(AdminClient& client, const TopOptions& options, bool as_json) {
  json previous;
  auto previous_at = std::chrono::steady_clock::now();
  for (uint32_t frame = 0; options.iterations == 0 || frame < options.iterations; ++frame) {
    if (frame > 0) std::this_thread::sleep_for(std::chrono::duration<double>(options.interval_s));
    json status, links, ops;
    fetch_top(client, status, links, ops);
    const auto now = std::chrono::steady_clock::now();
    if (as_json) {
      std::cout << json{{"status", status}, {"links", links}, {"ops", ops}}.dump() << "\n";
    } else {
      std::printf("\033[H\033[2J");  // home, clear: a fresh screen each frame
      plexus::ctl::print_top(status, links, ops, previous.is_null() ? nullptr : &previous,
                             std::chrono::duration<double>(now - previous_at).count());
    }
    std::fflush(stdout);
    previous = std::move(status);
    previous_at = now;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "plexusctl: inspect the node's plexusd, follow its events, drain its NICs or the node, "
      "show and reload its settings (and inject faults into its paths or its engine)"};
  std::string socket_path;
  bool as_json = false;
  app.add_option("--socket", socket_path,
                 "plexusd's socket (default: $PLEXUS_SOCKET, else the daemon's default path)");
  app.add_flag("--json", as_json, "Print JSON instead of a table");
  app.require_subcommand(1);
  auto* status_cmd = app.add_subcommand("status", "Daemon summary and its rank sessions");
  auto* comms_cmd = app.add_subcommand("comms", "Communicators, their ranks and state");
  auto* jobs_cmd = app.add_subcommand(
      "jobs",
      "Jobs ($PLEXUS_JOB of their ranks, else the process name): ranks connected, ops and "
      "payload by collective, failed completions, since the daemon started");
  TopOptions top_options;
  auto* top_cmd = app.add_subcommand(
      "top",
      "A live screen of the node: NIC rates and latency, jobs' op rates, collectives in flight "
      "(--json: one JSON object per refresh)");
  top_cmd->add_option("--interval", top_options.interval_s, "Seconds between refreshes")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  top_cmd->add_option("--iterations,-n", top_options.iterations,
                      "Stop after this many refreshes (default: until ^C)");
  auto* paths_cmd = app.add_subcommand(
      "paths",
      "Data links to peer daemons: each path's NIC, state, bytes, measured rate, and "
      "each peer's failovers and resent bytes");
  auto* nics_cmd = app.add_subcommand(
      "nics",
      "The NICs that serve peer daemons: state, speed, paths, data rates and chunk latency "
      "over the last second, failures and resent bytes since the daemon started");
  bool stuck_only = false;
  bool show_finished = false;
  auto* ops_cmd = app.add_subcommand(
      "ops",
      "Collectives in flight on this node: communicator, job, size, state, age, and what each "
      "waits for (a local rank that has not submitted it, a node whose data has not come)");
  ops_cmd->add_flag("--stuck", stuck_only,
                    "Only collectives stalled (no progress for plexusd --stall-ms), with the "
                    "rank (pid, node) or node they wait for");
  ops_cmd->add_flag("--finished", show_finished,
                    "Also the last 64 finished, with arrival spread and run time");
  EventsOptions events_options;
  auto* events_cmd = app.add_subcommand(
      "events",
      "Events: stalled collectives, slow paths, rank skew, failed paths, lost peers (--json: "
      "the JSON lines as plexusd writes them to --events-file)");
  events_cmd->add_flag("--follow,-f", events_options.follow, "Keep printing new events");
  events_cmd
      ->add_option("--for", events_options.for_seconds,
                   "With --follow: stop after this many seconds (default: until ^C)")
      ->check(CLI::NonNegativeNumber);
  events_cmd
      ->add_option("--last,-n", events_options.last,
                   "Start with the newest this many events (0 with --follow: only new "
                   "ones)")
      ->capture_default_str();
  auto* nic_cmd = app.add_subcommand(
      "nic",
      "drain NAME: move traffic to peers off a NIC (no new frames on it, in both "
      "directions; nothing is resent); undrain NAME: take it back; fault NAME: inject a fault "
      "into its paths (plexusd --fault-injection). Needs root, plexusd's own user or a member "
      "of plexusd --admin-group");
  nic_cmd->require_subcommand(1);
  std::string nic_name;
  auto* drain_cmd = nic_cmd->add_subcommand("drain", "Move traffic off NIC NAME");
  auto* undrain_cmd = nic_cmd->add_subcommand("undrain", "Let NIC NAME carry traffic again");
  auto* fault_cmd = nic_cmd->add_subcommand(
      "fault",
      "Inject a fault into every path over NIC NAME, as the transport would see one of its "
      "own (RDMA: the queue pair forced into the error state); their frames go on the other "
      "paths. Only where plexusd runs with --fault-injection");
  for (auto* sub : {drain_cmd, undrain_cmd, fault_cmd}) {
    sub->add_option("NAME", nic_name, "The interface, as in plexusctl paths")->required();
  }
  auto* engine_cmd = app.add_subcommand(
      "engine", "hold MS: hold plexusd's engine thread, as a stuck op would (watchdog drills)");
  engine_cmd->require_subcommand(1);
  uint32_t hold_ms = 0;
  auto* hold_cmd = engine_cmd->add_subcommand(
      "hold",
      "Hold the engine thread MS milliseconds (1..600000): no op makes progress meanwhile, and "
      "under systemd the watchdog pings stop. Only where plexusd runs with --fault-injection; "
      "needs root, plexusd's own user or a member of plexusd --admin-group");
  hold_cmd->add_option("MS", hold_ms, "Milliseconds")->required();
  auto* job_cmd = app.add_subcommand(
      "job",
      "set NAME --class C --weight W: a job's share of the links to other nodes from now on "
      "(frames already waiting too). Classes go in strict priority (latency, then bulk, then "
      "background, each lower one keeping its floor); jobs of one class share by weight. "
      "Needs root, plexusd's own user or a member of plexusd --admin-group");
  job_cmd->require_subcommand(1);
  auto* job_set_cmd = job_cmd->add_subcommand("set", "Set job NAME's class and weight");
  std::string job_name, job_class;
  uint32_t job_weight = 1;
  job_set_cmd->add_option("NAME", job_name, "The job, as plexusctl jobs shows it")->required();
  job_set_cmd->add_option("--class", job_class, "latency, bulk or background")->required();
  job_set_cmd->add_option("--weight", job_weight, "Within its class, 1..1000")
      ->capture_default_str();
  auto* config_cmd = app.add_subcommand(
      "config",
      "The settings plexusd runs with, as a config file (plexusd --config); reload: have it "
      "read its config file again, as SIGHUP does (needs root, plexusd's own user or a member "
      "of plexusd --admin-group)");
  auto* reload_cmd = config_cmd->add_subcommand(
      "reload",
      "Read the config file again: job policies and caps, stall-ms, rank-skew-ms, "
      "slow-path-ratio, parallel-threshold, local-slice-bytes, log-level and events-file change "
      "at once; other changes are named and wait for a restart. A file that does not read is "
      "refused with its line, and the settings in use are kept");
  auto* node_cmd = app.add_subcommand(
      "node",
      "drain: admit no new communicators and let the current ones run to their end (--wait: "
      "until then); undrain: admit them again; status: how the drain stands. Drain and "
      "undrain need root, plexusd's own user or a member of plexusd --admin-group");
  node_cmd->require_subcommand(1);
  double drain_wait_s = 0;
  auto* node_drain_cmd = node_cmd->add_subcommand(
      "drain",
      "Refuse new communicators on this node; print how many are still running, and with "
      "--wait, wait for them to end: then stopping plexusd (SIGTERM) loses nothing");
  node_drain_cmd
      ->add_option("--wait", drain_wait_s,
                   "Wait up to this many seconds for the node to be drained, printing "
                   "progress; exit 1 if it is not")
      ->check(CLI::Range(0.0, 7.0 * 24 * 3600));
  auto* node_undrain_cmd = node_cmd->add_subcommand("undrain", "Admit new communicators again");
  auto* node_status_cmd =
      node_cmd->add_subcommand("status", "Whether the node is draining, and what still runs");
  auto* models_cmd = app.add_subcommand(
      "models",
      "The weight store: each model's versions (complete or still building), their bytes and "
      "age, pulls served and pulls waiting for a newer version; the memory held and its cap");
  for (auto* sub : {status_cmd,  comms_cmd,      jobs_cmd,         top_cmd,         paths_cmd,
                    nics_cmd,    ops_cmd,        events_cmd,       nic_cmd,         drain_cmd,
                    undrain_cmd, fault_cmd,      job_set_cmd,      hold_cmd,        config_cmd,
                    reload_cmd,  node_drain_cmd, node_undrain_cmd, node_status_cmd, models_cmd}) {
    sub->add_flag("--json", as_json, "Print JSON instead of a table");
  }
  CLI11_PARSE(app, argc, argv);
  if (socket_path.empty()) socket_path = plexus::shm::default_socket_path();

  json result;
  try {
    AdminClient client(socket_path);
    if (events_cmd->parsed()) {
      show_events(client, events_options, as_json);
      return 0;
    }
    if (top_cmd->parsed()) {
      show_top(client, top_options, as_json);
      return 0;
    }
    if (config_cmd->parsed())
      return plexus::ctl::show_config(client, reload_cmd->parsed(), as_json);
    if (models_cmd->parsed()) return plexus::ctl::show_models(client, as_json);
    if (node_cmd->parsed()) {
      using plexus::ctl::DrainAction;
      return plexus::ctl::node_drain(client,
                                     node_drain_cmd->parsed()     ? DrainAction::kDrain
                                     : node_undrain_cmd->parsed() ? DrainAction::kUndrain
                                                                  : DrainAction::kQuery,
                                     drain_wait_s, as_json);
    }
    client.call(
        [&](control::ClientMessage::Builder message) {
          if (paths_cmd->parsed() || nics_cmd->parsed()) {
            message.setLinks();
          } else if (ops_cmd->parsed()) {
            message.setOps();
          } else if (fault_cmd->parsed()) {
            message.setNicFault(nic_name);
          } else if (hold_cmd->parsed()) {
            message.setEngineHold(hold_ms);
          } else if (job_set_cmd->parsed()) {
            auto set = message.initJobSet();
            set.setName(job_name);
            set.setTrafficClass(job_class);
            set.setWeight(job_weight);
          } else if (nic_cmd->parsed()) {
            auto drain = message.initNicDrain();
            drain.setNic(nic_name);
            drain.setDrained(drain_cmd->parsed());
          } else {
            message.setStatus();
          }
        },
        [&](control::DaemonMessage::Reader root) {
          if (root.isStatusReply()) {
            result = plexus::ctl::status_to_json(root.getStatusReply());
          } else if (root.isLinksReply()) {
            result = plexus::ctl::links_to_json(root.getLinksReply());
          } else if (root.isOpsReply()) {
            result = plexus::ctl::ops_to_json(root.getOpsReply());
          } else if (root.isJobSetReply()) {
            result = {{"job", job_name}, {"class", job_class}, {"weight", job_weight}};
          } else if (root.isEngineHoldReply()) {
            result = {{"engine_hold_ms", hold_ms}};
          } else if (root.isNicFaultReply()) {
            result = {{"nic", nic_name}, {"faulted_paths", root.getNicFaultReply()}};
          } else if (root.isNicDrainReply()) {
            result = {{"nic", nic_name},
                      {"drained", drain_cmd->parsed()},
                      {"paths", root.getNicDrainReply().getPaths()}};
          } else {
            throw plexus::ctl::Refused("plexusd on " + socket_path +
                                       " answered with an unexpected reply");
          }
        });
  } catch (const plexus::ctl::Refused& e) {
    std::fprintf(stderr, "plexusctl: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plexusctl: %s\n", e.what());
    return kExitDaemonUnavailable;
  }
  if (ops_cmd->parsed() && stuck_only) result = plexus::ctl::only_stuck(std::move(result));
  if (as_json) {
    const json& shown = comms_cmd->parsed()  ? result["comms"]
                        : jobs_cmd->parsed() ? result["jobs"]
                        : nics_cmd->parsed() ? result["nic_info"]
                                             : result;
    std::cout << shown.dump(2) << "\n";
  } else if (comms_cmd->parsed()) {
    plexus::ctl::print_comms(result);
  } else if (jobs_cmd->parsed()) {
    plexus::ctl::print_jobs(result);
  } else if (paths_cmd->parsed()) {
    plexus::ctl::print_paths(result);
  } else if (nics_cmd->parsed()) {
    plexus::ctl::print_nics(result);
  } else if (ops_cmd->parsed()) {
    plexus::ctl::print_ops(result, show_finished);
  } else if (job_set_cmd->parsed()) {
    std::printf("job %s: class %s, weight %u\n", job_name.c_str(), job_class.c_str(), job_weight);
  } else if (hold_cmd->parsed()) {
    std::printf("the engine thread is held for %u ms\n", hold_ms);
  } else if (fault_cmd->parsed()) {
    std::printf("fault injected into %u path(s) over NIC %s\n",
                result["faulted_paths"].get<unsigned>(), nic_name.c_str());
  } else if (nic_cmd->parsed()) {
    std::printf("NIC %s %s (%u path(s) over it now)\n", nic_name.c_str(),
                drain_cmd->parsed() ? "drained" : "undrained", result["paths"].get<unsigned>());
  } else {
    plexus::ctl::print_status(result);
  }
  return 0;
}
