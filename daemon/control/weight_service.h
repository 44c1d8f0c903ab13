// The weight store's requests (plexus_weights_*): a publish copied in from the publisher's
// pool, a pull copied out into the puller's, pulls that wait for a version (each until its
// own deadline), a model's newest version, and the store as plexusctl models and the metrics
// show it. Every field a client sends is checked here before the store or a copy sees it:
// names and counts within bounds, every tensor inside the client's pool or inside a GPU
// allocation it registered (looked up on the engine thread, which owns the regions; the
// device's copy engines then copy it on the copier thread).
//
// Control thread only; the copies run on the store's copier thread, which posts back here.
#pragma once

#include <uv.h>

#include <capnp/message.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/engine/engine.h"
#include "daemon/engine/session.h"
#include "daemon/engine/weight_relay.h"
#include "daemon/gpu/device_memory.h"
#include "daemon/peers/loop_timer.h"
#include "daemon/weights/weight_copier.h"
#include "daemon/weights/weight_store.h"
#include "monitor/metric_families.h"
#include "shm/control.capnp.h"
#include "transports/peer/peer_handshake.h"

namespace plexus::daemon {

class WeightService {
 public:
  struct Settings {
    uint64_t max_bytes = 0;      // the store's cap on host memory
    uint32_t versions_kept = 0;  // complete versions kept per model
    unsigned copy_workers = 0;   // threads besides the copier's own for large copies
  };
  struct Hooks {
    std::function<bool(uint64_t session_id, capnp::MessageBuilder& message)> reply;
    std::function<void(uint64_t session_id, uint32_t request_id, plexus_result_t,
                       const std::string& message)>
        send_error;
    // Runs `fn` on the control thread later (from the copier thread).
    std::function<void(std::function<void()> fn)> post;
    // Session `session_id` while its connection is open (null once it closed).
    std::function<std::shared_ptr<const Session>(uint64_t session_id)> session;
    // Runs `fn` on the engine thread (the relay between nodes lives there).
    std::function<void(std::function<void(Engine&)> fn)> engine;
    // A node message to another daemon (NodeJoins::send: false without --peer-listen); this
    // daemon's instance id.
    std::function<bool(uint64_t instance, const std::vector<std::string>& addresses,
                       capnp::MessageBuilder& message)>
        send_node;
    std::function<uint64_t()> instance_id;
    // Session `session_id`'s GPU allocations `regions` (null where it registered none such)
    // and the device that maps them, handed to `then` on the control thread later.
    using GpuRegionsFound = std::function<void(std::vector<std::shared_ptr<gpu::DeviceMapping>>,
                                               std::shared_ptr<gpu::DeviceMemory>)>;
    std::function<void(uint64_t session_id, std::vector<uint32_t> regions, GpuRegionsFound then)>
        gpu_regions;
  };

  WeightService(Settings settings, Hooks hooks);
  ~WeightService();
  WeightService(const WeightService&) = delete;
  WeightService& operator=(const WeightService&) = delete;

  // Also gives the engine's relay the store's memory.
  void start(uv_loop_t* loop);
  // As the loop ends: the copies still queued finish (their replies are dropped), the timer
  // closes.
  void close();

  // The copy holds `session` only weakly: a publisher gone before it starts is dropped.
  void publish(const std::shared_ptr<const Session>& session, uint32_t request_id,
               shm::control::WeightsPublish::Reader publish);
  void pull(const Session& session, uint32_t request_id, shm::control::WeightsPull::Reader pull);
  void latest(const Session& session, uint32_t request_id, const std::string& model);
  void list(uint64_t session_id, uint32_t request_id);

  // Across nodes (weight_service_relay.cc). A key's token names a model published here
  // (advertise), or a model here is a replica of another node's (subscribe: that node's
  // daemon is asked to push it every version).
  void advertise(const Session& session, uint32_t request_id, shm::control::WeightsKey::Reader key);
  void subscribe(const Session& session, uint32_t request_id, shm::control::WeightsKey::Reader key);
  // Another daemon subscribed to a model advertised here.
  void on_node_subscribe(const transports::PeerIdentity& peer, uint64_t relay_id, uint64_t have);
  // A version came whole from another node (the engine's relay).
  void arrived(uint64_t relay_id, std::shared_ptr<const weights::Version> version);
  // Its connection closed: its waiting pulls are dropped.
  void session_closed(uint64_t session_id);
  void collect_metrics(monitor::MetricFamilies& metrics) const;
  // What the store holds that a client may still want: complete versions, or models other
  // nodes get from here or send here. "" when nothing (the daemon may exit when idle).
  std::string holding() const;

 private:
  struct Destination {  // or a publisher's source
    std::string name;
    uint64_t offset = 0;  // in the pool, or in the GPU region
    uint64_t bytes = 0;
    uint32_t region = 0;  // 0: the pool
    // A GPU region's mapping and device, once located (locate_gpu).
    std::shared_ptr<const gpu::DeviceMapping> mapping;
    std::shared_ptr<gpu::DeviceMemory> device;
  };
  struct PublishFields {
    std::string model;
    uint64_t version = 0;
    uint32_t shard = 0;
    uint32_t shards = 0;
  };
  struct Waiter {
    uint64_t session_id = 0;
    uint32_t request_id = 0;
    uint32_t uid = 0;
    uint64_t version = 0;  // 0: any newer than newer_than
    uint64_t newer_than = 0;
    weights::Clock::time_point deadline;
    std::vector<Destination> tensors;
  };

  // Checks the request's tensors against the session's pool (a GPU region's later, in
  // locate_gpu); "" when they are fine.
  template <typename List>
  std::string read_tensors(const Session& session, List tensors,
                           std::vector<Destination>& out) const;
  // Hands `then` the tensors with their GPU regions located and checked (at once when none
  // is in a GPU region), or why not (prefixed with `model`'s name).
  using Located = std::function<void(std::string why, std::vector<Destination>)>;
  void locate_gpu(uint64_t session_id, const std::string& model, std::vector<Destination> tensors,
                  Located then);
  // The job's spans, or its device copies, for `tensor` (to_store: publish; else pull).
  static void add_copy(weights::CopyJob& job, const Destination& tensor, std::byte* store,
                       bool to_store, std::byte* pool);
  void publish_located(uint64_t session_id, uint32_t request_id, const PublishFields& fields,
                       std::vector<Destination> sources);
  void pull_located(Waiter waiter, const std::string& model, uint32_t timeout_ms);
  // Serves `waiter` from the store now if it can (true), or says it never can (fails it).
  bool try_serve(Waiter& waiter, const std::string& model);
  void copy_out(const Waiter& waiter, const std::string& model,
                std::shared_ptr<const weights::Version> version);
  void published(const std::shared_ptr<weights::PendingShard>& pending, uint64_t session_id,
                 uint32_t request_id);
  void serve_waiters(const std::string& model);
  void expire_waiters();
  void arm_timer();

  // "" or why `model` cannot name a model.
  static std::string check_model_name(const std::string& model);
  // A version of `model` complete here goes to the nodes subscribed to it.
  void push_to_subscribers(const std::string& model);

  struct Published {  // a model here that other nodes subscribe to
    std::string model;
    uint32_t uid = 0;                               // who advertised it
    std::vector<WeightRelay::NodeRef> subscribers;  // the chain, in subscription order
  };
  struct Replica {  // a model here that another node's daemon pushes
    std::string model;
    uint32_t uid = 0;
  };

  weights::WeightStore store_;
  std::map<uint64_t, Published> published_;  // by relay id
  std::map<uint64_t, Replica> replicas_;     // by relay id
  weights::WeightCopier copier_;
  Hooks hooks_;
  LoopTimer timer_;
  std::multimap<std::string, Waiter, std::less<>> waiters_;  // by model
  uint64_t refused_publishes_ = 0;
};

}  // namespace plexus::daemon
