#include "daemon/control/weight_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "common/human_bytes.h"
#include "daemon/control/daemon_reply.h"
#include "shm/ring_layout.h"

namespace plexus::daemon {

namespace control = shm::control;
using weights::Clock;

namespace {

// Pulls one session may have waiting at once: a rollout waits for one version at a time.
constexpr size_t kMaxWaitingPullsPerSession = 64;

// "version 4 of model 'm'", or "of model 'm' newer than 3".
std::string wanted_version(const std::string& model, uint64_t version, uint64_t newer_than) {
  return version != 0 ? std::to_string(version) + " of model '" + model + "'"
                      : "of model '" + model + "' newer than " + std::to_string(newer_than);
}

}  // namespace

// A model's name goes into logs, plexusctl's table and metric labels: printable ASCII only.
std::string WeightService::check_model_name(const std::string& model) {
  if (model.empty()) return "a model needs a name";
  if (model.size() > weights::kMaxModelNameBytes) {
    return "a model's name has at most " + std::to_string(weights::kMaxModelNameBytes) +
           " bytes (this one has " + std::to_string(model.size()) + ")";
  }
  for (char c : model) {
    if (c <= ' ' || c > '~') {
      return "a model's name is printable ASCII without spaces (byte " +
             std::to_string(static_cast<unsigned char>(c)) + " is not)";
    }
  }
  return {};
}

WeightService::WeightService(Settings settings, Hooks hooks)
    : store_(weights::WeightStore::Settings{.max_bytes = settings.max_bytes,
                                            .versions_kept = settings.versions_kept}),
      copier_(settings.copy_workers),
      hooks_(std::move(hooks)) {}

WeightService::~WeightService() { copier_.stop(); }

void WeightService::start(uv_loop_t* loop) {
  timer_.open(loop, [this] { expire_waiters(); });
  if (hooks_.engine) {
    hooks_.engine([memory = store_.memory()](Engine& e) { e.weights().set_memory(memory); });
  }
}

void WeightService::close() {
  timer_.close();
  waiters_.clear();
}

template <typename List>
std::string WeightService::read_tensors(const Session& session, List tensors,
                                        std::vector<Destination>& out) const {
  if (session.role() != SessionRole::kRank) return "only a rank process (with a pool) may do this";
  if (tensors.size() > weights::kMaxTensorsPerShard) {
    return "at most " + std::to_string(weights::kMaxTensorsPerShard) +
           " tensors per request (this one has " + std::to_string(tensors.size()) + ")";
  }
  const uint64_t pool = session.pool().size();
  out.reserve(tensors.size());
  for (auto t : tensors) {
    std::string name = t.getName();
    if (name.empty() || name.size() > weights::kMaxTensorNameBytes) {
      return "a tensor's name has 1 to " + std::to_string(weights::kMaxTensorNameBytes) + " bytes";
    }
    const uint64_t offset = t.getOffset();
    const uint64_t bytes = t.getBytes();
    const uint32_t region = t.getRegion();
    if (region == shm::kHostPoolRegion && (offset > pool || bytes > pool - offset)) {
      return "tensor '" + name + "' (" + std::to_string(bytes) + " bytes at offset " +
             std::to_string(offset) + ") is not inside the process's pool of " +
             std::to_string(pool) + " bytes";
    }
    out.push_back(
        Destination{.name = std::move(name), .offset = offset, .bytes = bytes, .region = region});
  }
  return {};
}

void WeightService::locate_gpu(uint64_t session_id, const std::string& model,
                               std::vector<Destination> tensors, Located then) {
  std::vector<uint32_t> regions;
  for (const Destination& t : tensors) {
    if (t.region != shm::kHostPoolRegion) regions.push_back(t.region);
  }
  if (regions.empty()) {
    then({}, std::move(tensors));
    return;
  }
  if (!hooks_.gpu_regions) {
    then("model '" + model + "': this daemon takes no GPU tensors", {});
    return;
  }
  hooks_.gpu_regions(
      session_id, regions,
      [model, tensors = std::move(tensors), then = std::move(then)](
          std::vector<std::shared_ptr<gpu::DeviceMapping>> found,
          std::shared_ptr<gpu::DeviceMemory> device) mutable {
        size_t next = 0;
        for (Destination& t : tensors) {
          if (t.region == shm::kHostPoolRegion) continue;
          std::shared_ptr<gpu::DeviceMapping> mapping = found[next++];
          std::string why;
          if (!mapping || !device) {
            why = "names GPU region " + std::to_string(t.region) +
                  ", which this process has not registered (or released)";
          } else if (t.offset > mapping->bytes() || t.bytes > mapping->bytes() - t.offset) {
            why = "(" + std::to_string(t.bytes) + " bytes at offset " + std::to_string(t.offset) +
                  ") is not inside its GPU allocation of " + std::to_string(mapping->bytes()) +
                  " bytes";
          }
          if (!why.empty()) {
            then("model '" + model + "': tensor '" + t.name + "' " + why, {});
            return;
          }
          t.mapping = std::move(mapping);
          t.device = device;
        }
        then({}, std::move(tensors));
      });
}

void WeightService::add_copy(weights::CopyJob& job, const Destination& tensor, std::byte* store,
                             bool to_store, std::byte* pool) {
  if (!tensor.mapping) {
    std::byte* in_pool = pool + tensor.offset;
    job.spans.push_back(to_store ? weights::CopySpan{store, in_pool, tensor.bytes}
                                 : weights::CopySpan{in_pool, store, tensor.bytes});
    return;
  }
  const auto toward =
      to_store ? gpu::DeviceMemory::Toward::kHost : gpu::DeviceMemory::Toward::kDevice;
  job.device_copies.push_back([toward, store, tensor] {
    return tensor.device->copy_aside(toward, store, *tensor.mapping, tensor.offset, tensor.bytes);
  });
}

void WeightService::publish(const std::shared_ptr<const Session>& session, uint32_t request_id,
                            control::WeightsPublish::Reader publish) {
  const uint64_t id = session->id();
  const std::string model = publish.getModel();
  std::vector<Destination> sources;
  std::string why = check_model_name(model);
  if (why.empty()) why = read_tensors(*session, publish.getTensors(), sources);
  if (!why.empty() && !model.empty()) why = "model '" + model + "': " + why;
  if (!why.empty()) {
    ++refused_publishes_;
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
    return;
  }
  PublishFields fields{.model = model,
                       .version = publish.getVersion(),
                       .shard = publish.getShard(),
                       .shards = publish.getShards()};
  locate_gpu(id, model, std::move(sources),
             [this, id, request_id, fields](std::string refused, std::vector<Destination> located) {
               if (refused.empty()) {
                 publish_located(id, request_id, fields, std::move(located));
                 return;
               }
               ++refused_publishes_;
               hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, refused);
             });
}

void WeightService::publish_located(uint64_t id, uint32_t request_id, const PublishFields& fields,
                                    std::vector<Destination> sources) {
  std::shared_ptr<const Session> session = hooks_.session(id);
  if (!session) return;  // gone while its GPU regions were looked up
  std::vector<weights::TensorSpec> specs;
  specs.reserve(sources.size());
  for (const Destination& s : sources) specs.push_back({.name = s.name, .bytes = s.bytes});
  bool for_memory = false;
  auto pending = store_.publish_begin(fields.model, fields.version, fields.shard, fields.shards,
                                      session->creds().uid, specs, for_memory);
  if (!pending) {
    ++refused_publishes_;
    const bool memory = for_memory;
    hooks_.send_error(id, request_id, memory ? PLEXUS_ERR_NO_MEMORY : PLEXUS_ERR_INVALID_ARGUMENT,
                      pending.error());
    return;
  }
  std::shared_ptr<weights::PendingShard> shard = pending.take();
  weights::CopyJob job;
  std::byte* to = shard->data->buffer->data();
  for (size_t i = 0; i < sources.size(); ++i) {
    add_copy(job, sources[i], to + shard->data->tensors[i].offset, true, session->pool().data());
  }
  job.client = session;
  job.holds = {shard->data->buffer};
  job.done = [this, shard, id, request_id](const std::string& failure) {
    hooks_.post([this, shard, id, request_id, failure] {
      if (failure.empty()) {
        published(shard, id, request_id);
        return;
      }
      store_.publish_failed(shard);  // nothing of it is kept
      if (failure == weights::kClientGone) return;
      ++refused_publishes_;
      hooks_.send_error(id, request_id, PLEXUS_ERR_SYSTEM,
                        "model '" + shard->model + "' version " + std::to_string(shard->version) +
                            ": copying a GPU tensor into the store: " + failure);
    });
  };
  copier_.copy(std::move(job));
}

void WeightService::published(const std::shared_ptr<weights::PendingShard>& pending,
                              uint64_t session_id, uint32_t request_id) {
  auto done = store_.publish_done(pending);
  if (!done) {
    ++refused_publishes_;
    hooks_.send_error(session_id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, done.error());
    return;
  }
  capnp::MallocMessageBuilder reply;
  daemon_reply(reply, request_id).setWeightsPublishReply(pending->version);
  hooks_.reply(session_id, reply);
  if (*done == 0) return;
  spdlog::info("weights: version {} of model '{}' complete ({} shard(s), {} held in all)", *done,
               pending->model, pending->shards, common::human_bytes(store_.held_bytes()));
  serve_waiters(pending->model);
  push_to_subscribers(pending->model);
}

void WeightService::pull(const Session& session, uint32_t request_id,
                         control::WeightsPull::Reader pull) {
  const uint64_t id = session.id();
  const std::string model = pull.getModel();
  Waiter waiter{.session_id = id,
                .request_id = request_id,
                .uid = session.creds().uid,
                .version = pull.getVersion(),
                .newer_than = pull.getNewerThan(),
                .deadline = Clock::now() + std::chrono::milliseconds(pull.getTimeoutMs()),
                .tensors = {}};
  std::string why = check_model_name(model);
  if (why.empty()) {
    why = read_tensors(session, pull.getTensors(), waiter.tensors);
    if (!why.empty()) why = "model '" + model + "': " + why;
  }
  if (why.empty()) why = store_.refuse_reader(model, waiter.uid);
  if (!why.empty()) {
    hooks_.send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
    return;
  }
  std::vector<Destination> tensors = std::move(waiter.tensors);
  locate_gpu(id, model, std::move(tensors),
             [this, waiter = std::move(waiter), model, timeout_ms = pull.getTimeoutMs()](
                 std::string refused, std::vector<Destination> located) mutable {
               if (!refused.empty()) {
                 hooks_.send_error(waiter.session_id, waiter.request_id,
                                   PLEXUS_ERR_INVALID_ARGUMENT, refused);
                 return;
               }
               waiter.tensors = std::move(located);
               pull_located(std::move(waiter), model, timeout_ms);
             });
}

void WeightService::pull_located(Waiter waiter, const std::string& model, uint32_t timeout_ms) {
  if (!hooks_.session(waiter.session_id)) return;  // gone while its GPU regions were looked up
  if (try_serve(waiter, model)) return;
  const uint64_t id = waiter.session_id;
  const size_t waiting = static_cast<size_t>(std::count_if(
      waiters_.begin(), waiters_.end(), [id](const auto& w) { return w.second.session_id == id; }));
  if (timeout_ms == 0 || waiting >= kMaxWaitingPullsPerSession) {
    hooks_.send_error(
        id, waiter.request_id, PLEXUS_ERR_TIMEOUT,
        "no complete version " + wanted_version(model, waiter.version, waiter.newer_than) +
            " (newest: " + std::to_string(store_.latest(model)) + "), and " +
            (timeout_ms == 0
                 ? std::string("the pull asked not to wait")
                 : "this process has " + std::to_string(waiting) + " pulls waiting already"));
    return;
  }
  waiters_.emplace(model, std::move(waiter));
  arm_timer();
}

bool WeightService::try_serve(Waiter& waiter, const std::string& model) {
  // Checked again here: a pull that waited from before the model's first publish.
  if (std::string why = store_.refuse_reader(model, waiter.uid); !why.empty()) {
    hooks_.send_error(waiter.session_id, waiter.request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
    return true;
  }
  if (waiter.version != 0 && store_.dropped(model, waiter.version)) {
    hooks_.send_error(waiter.session_id, waiter.request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                      "version " + std::to_string(waiter.version) + " of model '" + model +
                          "' is not kept (kept now: " + store_.kept(model) + ")");
    return true;
  }
  std::shared_ptr<const weights::Version> version = store_.find(model, waiter.version);
  if (!version || (waiter.version == 0 && version->number <= waiter.newer_than)) return false;
  // Every destination named in the version with its size, before anything is copied.
  for (const Destination& d : waiter.tensors) {
    auto at = version->index.find(d.name);
    std::string why;
    if (at == version->index.end()) {
      why = "version " + std::to_string(version->number) + " of model '" + model +
            "' has no tensor '" + d.name + "'";
    } else {
      const weights::Shard& shard = *version->parts[at->second.first];
      const uint64_t bytes = shard.tensors[at->second.second].bytes;
      if (bytes != d.bytes) {
        why = "tensor '" + d.name + "' of version " + std::to_string(version->number) +
              " of model '" + model + "' has " + std::to_string(bytes) +
              " bytes, and the pull gives " + std::to_string(d.bytes) + " for it";
      }
    }
    if (!why.empty()) {
      hooks_.send_error(waiter.session_id, waiter.request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
      return true;
    }
  }
  copy_out(waiter, model, std::move(version));
  return true;
}

void WeightService::copy_out(const Waiter& waiter, const std::string& model,
                             std::shared_ptr<const weights::Version> version) {
  std::shared_ptr<const Session> session = hooks_.session(waiter.session_id);
  if (!session) return;
  weights::CopyJob job;
  uint64_t bytes = 0;
  for (const Destination& d : waiter.tensors) {
    const auto [shard_index, tensor] = version->index.find(d.name)->second;
    const weights::Shard& shard = *version->parts[shard_index];
    // The version is only read: held (job.holds) until the copy ends.
    add_copy(job, d, shard.buffer->data() + shard.tensors[tensor].offset, false,
             session->pool().data());
    bytes += d.bytes;
  }
  const uint64_t number = version->number;
  job.client = session;
  job.holds = {version};
  const uint64_t id = waiter.session_id;
  const uint32_t request_id = waiter.request_id;
  job.done = [this, model, number, bytes, id, request_id](const std::string& failure) {
    if (failure == weights::kClientGone) return;  // the puller went away first
    hooks_.post([this, model, number, bytes, id, request_id, failure] {
      if (!failure.empty()) {
        hooks_.send_error(id, request_id, PLEXUS_ERR_SYSTEM,
                          "version " + std::to_string(number) + " of model '" + model +
                              "': copying it into a GPU tensor: " + failure);
        return;
      }
      store_.count_pull(model, bytes);
      capnp::MallocMessageBuilder reply;
      daemon_reply(reply, request_id).setWeightsPullReply(number);
      hooks_.reply(id, reply);
    });
  };
  copier_.copy(std::move(job));
}

// Both take the waiters out of the map before answering them: an answer that cannot be
// written closes its connection, and that (session_closed) erases from the map.
void WeightService::serve_waiters(const std::string& model) {
  auto [begin, end] = waiters_.equal_range(model);
  std::vector<Waiter> waiting;
  for (auto it = begin; it != end; ++it) waiting.push_back(std::move(it->second));
  waiters_.erase(begin, end);
  for (Waiter& w : waiting) {
    if (try_serve(w, model) || !hooks_.session(w.session_id)) continue;
    waiters_.emplace(model, std::move(w));  // still waiting for a newer one
  }
  arm_timer();
}

void WeightService::expire_waiters() {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<std::string, Waiter>> expired;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->second.deadline > now) {
      ++it;
      continue;
    }
    expired.emplace_back(it->first, std::move(it->second));
    it = waiters_.erase(it);
  }
  for (const auto& [model, w] : expired) {
    hooks_.send_error(w.session_id, w.request_id, PLEXUS_ERR_TIMEOUT,
                      "no complete version " + wanted_version(model, w.version, w.newer_than) +
                          " came in time (newest: " + std::to_string(store_.latest(model)) + ")");
  }
  arm_timer();
}

void WeightService::arm_timer() {
  if (!timer_.is_open()) return;
  if (waiters_.empty()) {
    timer_.stop();
    return;
  }
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [model, w] : waiters_) next = std::min(next, w.deadline);
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
  timer_.start(static_cast<uint64_t>(std::max<int64_t>(wait.count(), 0)), 0);
}

void WeightService::session_closed(uint64_t session_id) {
  std::erase_if(waiters_,
                [session_id](const auto& w) { return w.second.session_id == session_id; });
  arm_timer();
}

void WeightService::latest(const Session& session, uint32_t request_id, const std::string& model) {
  std::string why = check_model_name(model);
  if (why.empty()) why = store_.refuse_reader(model, session.creds().uid);
  if (!why.empty()) {
    hooks_.send_error(session.id(), request_id, PLEXUS_ERR_INVALID_ARGUMENT, why);
    return;
  }
  capnp::MallocMessageBuilder reply;
  daemon_reply(reply, request_id).setWeightsLatestReply(store_.latest(model));
  hooks_.reply(session.id(), reply);
}

void WeightService::list(uint64_t session_id, uint32_t request_id) {
  const std::vector<weights::ModelSummary> models = store_.summary();
  capnp::MallocMessageBuilder reply;
  auto list = daemon_reply(reply, request_id).initWeightsListReply();
  list.setHeldBytes(store_.held_bytes());
  list.setCapBytes(store_.settings().max_bytes);
  list.setVersionsKept(store_.settings().versions_kept);
  list.setSpareBytes(store_.spare_bytes());
  auto out = list.initModels(static_cast<unsigned>(models.size()));
  for (unsigned i = 0; i < models.size(); ++i) {
    const weights::ModelSummary& m = models[i];
    auto info = out[i];
    info.setName(m.name);
    info.setOwnerUid(m.owner_uid);
    info.setPublishes(m.publishes);
    info.setPulls(m.pulls);
    info.setPulledBytes(m.pulled_bytes);
    info.setWaiting(static_cast<uint32_t>(waiters_.count(m.name)));
    auto versions = info.initVersions(static_cast<unsigned>(m.versions.size()));
    for (unsigned v = 0; v < m.versions.size(); ++v) {
      versions[v].setNumber(m.versions[v].number);
      versions[v].setBytes(m.versions[v].bytes);
      versions[v].setShards(m.versions[v].shards);
      versions[v].setShardsIn(m.versions[v].shards_in);
      versions[v].setComplete(m.versions[v].complete);
      versions[v].setAgeS(m.versions[v].age_s);
    }
  }
  hooks_.reply(session_id, reply);
}

std::string WeightService::holding() const {
  if (store_.held_bytes() == 0 && published_.empty() && replicas_.empty()) return {};
  return common::human_bytes(store_.held_bytes()) + " of weights in " +
         std::to_string(store_.summary().size()) + " model(s), " +
         std::to_string(published_.size()) + " advertised to other nodes and " +
         std::to_string(replicas_.size()) + " subscribed from them";
}

void WeightService::collect_metrics(monitor::MetricFamilies& m) const {
  m.gauge("plexus_weights_held_bytes", "Host memory the weight store holds (all models)", {},
          static_cast<double>(store_.held_bytes()));
  m.gauge("plexus_weights_spare_bytes",
          "Buffers of dropped versions the weight store keeps for the next of their size "
          "(under the cap)",
          {}, static_cast<double>(store_.spare_bytes()));
  m.gauge("plexus_weights_cap_bytes", "The weight store's cap (--weight-store-bytes)", {},
          static_cast<double>(store_.settings().max_bytes));
  m.counter("plexus_weights_refused_publishes_total",
            "Weight publishes refused (bad fields, versions going back, the cap)", {},
            static_cast<double>(refused_publishes_));
  for (const weights::ModelSummary& s : store_.summary()) {
    const monitor::MetricLabels model = {{"model", s.name}};
    uint64_t newest = 0;
    double age = 0;
    uint64_t bytes = 0;
    for (const auto& v : s.versions) {
      if (!v.complete) continue;
      newest = v.number;
      age = v.age_s;
      bytes = v.bytes;
    }
    m.gauge("plexus_weights_latest_version", "A model's newest complete version (0: none)", model,
            static_cast<double>(newest));
    m.gauge("plexus_weights_latest_bytes", "The bytes of a model's newest complete version", model,
            static_cast<double>(bytes));
    m.gauge("plexus_weights_latest_age_seconds", "Seconds since a model's newest version completed",
            model, age);
    m.counter("plexus_weights_pulls_total", "Pulls served from a model", model,
              static_cast<double>(s.pulls));
    m.counter("plexus_weights_pulled_bytes_total", "Bytes pulls copied out of a model", model,
              static_cast<double>(s.pulled_bytes));
    m.gauge("plexus_weights_waiting_pulls", "Pulls waiting for a newer version of a model", model,
            static_cast<double>(waiters_.count(s.name)));
  }
}

}  // namespace plexus::daemon
