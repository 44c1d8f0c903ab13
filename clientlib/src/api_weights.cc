// The C API's weight store calls: a publish or pull names each tensor by its offset in this
// process's pool, or in a GPU allocation registered with the daemon (its copy engines copy
// it); a host tensor outside the pool is staged through one pool block for the call
// (copied in before a publish, out after a pull). A table of tensors larger than one control
// frame holds goes in batches: a publish's as shards of the version, a pull's as requests
// for the version the first one got.
#include <capnp/serialize.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "clientlib/src/api_common.h"
#include "clientlib/src/unique_id.h"
#include "common/frame_codec.h"
#include "shm/control.capnp.h"
#include "shm/framing.h"
#include "shm/ring_layout.h"

namespace plexus::client {
namespace {

namespace control = shm::control;

// Where each tensor is for the daemon; the pool block host tensors outside the pool go
// through, freed with the call.
class Staging {
 public:
  explicit Staging(ClientContext& ctx) : ctx_(ctx), pool_(ctx.pool()) {}
  ~Staging() {
    if (block_ != nullptr) pool_.deallocate(block_);
  }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Each tensor's region and offset there: its own place in the pool or a GPU allocation
  // (registered here if new), or its place in the staging block (made here). PLEXUS_SUCCESS
  // when they all have one; otherwise the code and why not: INVALID_ARGUMENT for GPU memory
  // that cannot be used, NO_MEMORY for a pool without room to stage.
  struct Placed {
    plexus_result_t code = PLEXUS_SUCCESS;
    std::string why;
  };
  Placed place(const plexus_weight_tensor_t* tensors, size_t count) {
    offsets_.resize(count);
    regions_.assign(count, shm::kHostPoolRegion);
    staged_.assign(count, false);
    uint64_t total = 0;
    for (size_t i = 0; i < count; ++i) {
      if (tensors[i].bytes == 0 || pool_.contains(tensors[i].buf, tensors[i].bytes)) continue;
      auto gpu = ctx_.gpu().locate(ctx_.control(), tensors[i].buf, tensors[i].bytes);
      if (!gpu) {
        return {PLEXUS_ERR_INVALID_ARGUMENT,
                "tensor '" + std::string(tensors[i].name) + "': " + gpu.error()};
      }
      if (*gpu) {
        regions_[i] = (*gpu)->region;
        offsets_[i] = (*gpu)->offset;
        continue;
      }
      staged_[i] = true;
      offsets_[i] = total;
      total += (tensors[i].bytes + 63) / 64 * 64;
    }
    if (total > 0) {
      block_ = static_cast<std::byte*>(pool_.allocate(total));
      if (block_ == nullptr) {
        return {PLEXUS_ERR_NO_MEMORY,
                "staging " + std::to_string(total) +
                    " bytes of buffers outside the pool: the pool has no room (" +
                    std::to_string(pool_.free_bytes()) +
                    " bytes free); allocate the tensors with plexus_alloc, or raise "
                    "PLEXUS_POOL_SIZE"};
      }
    }
    const uint64_t base = block_ != nullptr ? pool_.offset_of(block_) : 0;
    for (size_t i = 0; i < count; ++i) {
      if (staged_[i]) {
        offsets_[i] += base;
      } else if (regions_[i] == shm::kHostPoolRegion) {
        offsets_[i] = tensors[i].bytes == 0 ? 0 : pool_.offset_of(tensors[i].buf);
      }
    }
    return {};
  }
  uint64_t offset(size_t i) const { return offsets_[i]; }
  uint32_t region(size_t i) const { return regions_[i]; }
  bool staged(size_t i) const { return staged_[i]; }
  std::byte* at(size_t i) const { return const_cast<std::byte*>(pool_.base()) + offsets_[i]; }

 private:
  ClientContext& ctx_;
  shm::ClientPool& pool_;
  std::byte* block_ = nullptr;
  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> regions_;
  std::vector<bool> staged_;
};

// The arguments every call checks alike; "" when they are fine.
std::string check_tensors(const plexus_weight_tensor_t* tensors, size_t count) {
  if (count > 0 && tensors == nullptr) return "tensors is NULL";
  for (size_t i = 0; i < count; ++i) {
    if (tensors[i].name == nullptr || tensors[i].name[0] == '\0') {
      return "tensor " + std::to_string(i) + " has no name";
    }
    if (tensors[i].buf == nullptr && tensors[i].bytes > 0) {
      return "tensor '" + std::string(tensors[i].name) + "' has no buffer";
    }
  }
  return {};
}

// A batch of tensors, [begin, end), whose table fits one request with room to spare (a
// client's frame is at most shm::kMaxClientFrameBytes; a tensor costs its name and about 64
// bytes of Cap'n Proto, a name at most 1024 bytes).
struct Batch {
  size_t begin = 0;
  size_t end = 0;
};
std::vector<Batch> batches(const plexus_weight_tensor_t* tensors, size_t count) {
  constexpr size_t kBudget = shm::kMaxClientFrameBytes / 2;
  std::vector<Batch> out{Batch{}};
  size_t used = 0;
  for (size_t i = 0; i < count; ++i) {
    const size_t cost = std::strlen(tensors[i].name) + 64;
    if (used + cost > kBudget && out.back().end > out.back().begin) {
      out.push_back(Batch{.begin = i, .end = i});
      used = 0;
    }
    used += cost;
    out.back().end = i + 1;
  }
  return out;
}

template <typename Request>
void fill_tensors(Request request, const plexus_weight_tensor_t* tensors, Batch batch,
                  const Staging& staging) {
  auto list = request.initTensors(static_cast<unsigned>(batch.end - batch.begin));
  for (size_t i = batch.begin; i < batch.end; ++i) {
    const auto at = static_cast<unsigned>(i - batch.begin);
    list[at].setName(tensors[i].name);
    list[at].setOffset(staging.offset(i));
    list[at].setBytes(tensors[i].bytes);
    list[at].setRegion(staging.region(i));
  }
}

// One pull request for `batch`: the version copied, or the failure (set as the last error).
plexus_result_t pull_batch(const char* model, uint64_t version, uint64_t newer_than,
                           uint32_t timeout_ms, const plexus_weight_tensor_t* tensors, Batch batch,
                           const Staging& staging, uint64_t* pulled) {
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<control::ClientMessage>().initWeightsPull();
  request.setModel(model);
  request.setVersion(version);
  request.setNewerThan(newer_than);
  request.setTimeoutMs(timeout_ms);
  fill_tensors(request, tensors, batch, staging);
  Reply reply = ClientContext::get().control().call(message);
  capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
  auto root = reader.getRoot<control::DaemonMessage>();
  if (!root.isWeightsPullReply()) return refused("plexus_weights_pull", root);
  *pulled = root.getWeightsPullReply();
  return PLEXUS_SUCCESS;
}

plexus_result_t publish(const char* call, const char* model, uint64_t version, uint32_t shard,
                        uint32_t shards, const plexus_weight_tensor_t* tensors, size_t count) {
  if (model == nullptr)
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": model is NULL");
  if (std::string why = check_tensors(tensors, count); !why.empty()) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": " + why);
  }
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    Staging staging(ctx);
    if (auto [code, why] = staging.place(tensors, count); code != PLEXUS_SUCCESS) {
      return fail(code, std::string(call) + ": " + why);
    }
    for (size_t i = 0; i < count; ++i) {
      if (staging.staged(i)) std::memcpy(staging.at(i), tensors[i].buf, tensors[i].bytes);
    }
    const std::vector<Batch> parts = batches(tensors, count);
    if (parts.size() > 1 && shards != 0) {
      return fail(PLEXUS_ERR_INVALID_ARGUMENT,
                  std::string(call) + ": shard " + std::to_string(shard) + "'s " +
                      std::to_string(count) +
                      " tensors' names are more than one request holds: publish it as more "
                      "shards of fewer tensors");
    }
    // Unsharded (shards 0 here): a large table goes as shards of the version, one per batch.
    for (size_t b = 0; b < parts.size(); ++b) {
      capnp::MallocMessageBuilder message;
      auto request = message.initRoot<control::ClientMessage>().initWeightsPublish();
      request.setModel(model);
      request.setVersion(version);
      request.setShard(shards != 0 ? shard : static_cast<uint32_t>(b));
      request.setShards(shards != 0 ? shards : static_cast<uint32_t>(parts.size()));
      fill_tensors(request, tensors, parts[b], staging);
      Reply reply = ctx.control().call(message);
      capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
      auto root = reader.getRoot<control::DaemonMessage>();
      if (!root.isWeightsPublishReply()) return refused(call, root);
    }
    return PLEXUS_SUCCESS;
  });
}

}  // namespace
}  // namespace plexus::client

using namespace plexus::client;

extern "C" {

plexus_result_t plexus_weights_publish(const char* model, uint64_t version,
                                       const plexus_weight_tensor_t* tensors, size_t count) {
  return publish("plexus_weights_publish", model, version, 0, 0, tensors, count);
}

plexus_result_t plexus_weights_publish_shard(const char* model, uint64_t version, uint32_t shard,
                                             uint32_t shards, const plexus_weight_tensor_t* tensors,
                                             size_t count) {
  return publish("plexus_weights_publish_shard", model, version, shard, shards, tensors, count);
}

plexus_result_t plexus_weights_pull(const char* model, uint64_t version, uint64_t newer_than,
                                    int64_t timeout_ms, const plexus_weight_tensor_t* tensors,
                                    size_t count, uint64_t* pulled) {
  const char* call = "plexus_weights_pull";
  if (pulled != nullptr) *pulled = 0;
  if (model == nullptr)
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_weights_pull: model is NULL");
  if (timeout_ms < -1) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_weights_pull: timeout_ms " +
                                                 std::to_string(timeout_ms) +
                                                 " (0: no wait, -1: no limit, else milliseconds)");
  }
  if (std::string why = check_tensors(tensors, count); !why.empty()) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": " + why);
  }
  return guarded([&]() -> plexus_result_t {
    ClientContext& ctx = ClientContext::get();
    Staging staging(ctx);
    if (auto [code, why] = staging.place(tensors, count); code != PLEXUS_SUCCESS) {
      return fail(code, std::string(call) + ": " + why);
    }
    constexpr uint32_t kNoLimit = std::numeric_limits<uint32_t>::max();
    const uint32_t timeout =
        timeout_ms < 0 || timeout_ms > kNoLimit ? kNoLimit : static_cast<uint32_t>(timeout_ms);
    const std::vector<Batch> parts = batches(tensors, count);
    // The first batch finds the version; the others ask for that one. If the store dropped it
    // meanwhile (two newer ones came), the whole pull starts again with the newest.
    constexpr int kAttempts = 3;
    uint64_t got = 0;
    for (int attempt = 1;; ++attempt) {
      plexus_result_t r =
          pull_batch(model, version, newer_than, timeout, tensors, parts[0], staging, &got);
      for (size_t b = 1; r == PLEXUS_SUCCESS && b < parts.size(); ++b) {
        uint64_t same = 0;
        r = pull_batch(model, got, 0, 0, tensors, parts[b], staging, &same);
      }
      if (r == PLEXUS_SUCCESS) break;
      uint64_t latest = 0;
      const bool moved_on = version == 0 && parts.size() > 1 && got != 0 &&
                            plexus_weights_latest(model, &latest) == PLEXUS_SUCCESS &&
                            latest != got;
      if (!moved_on || attempt == kAttempts) return r;
    }
    for (size_t i = 0; i < count; ++i) {
      if (staging.staged(i)) std::memcpy(tensors[i].buf, staging.at(i), tensors[i].bytes);
    }
    if (pulled != nullptr) *pulled = got;
    return PLEXUS_SUCCESS;
  });
}

plexus_result_t plexus_weights_latest(const char* model, uint64_t* version) {
  if (version != nullptr) *version = 0;
  if (model == nullptr || version == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_weights_latest: model or version is NULL");
  }
  return guarded([&]() -> plexus_result_t {
    capnp::MallocMessageBuilder message;
    message.initRoot<control::ClientMessage>().setWeightsLatest(model);
    Reply reply = ClientContext::get().control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (!root.isWeightsLatestReply()) return refused("plexus_weights_latest", root);
    *version = root.getWeightsLatestReply();
    return PLEXUS_SUCCESS;
  });
}

namespace {

// Sends a weightsAdvertise or weightsSubscribe for `key` and `model`.
plexus_result_t send_key(const char* call, bool subscribe, const plexus_unique_id_t& key,
                         const char* model) {
  UniqueIdParts parts;
  if (std::string why = read_unique_id(key, &parts); !why.empty()) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, std::string(call) + ": " + why);
  }
  return guarded([&]() -> plexus_result_t {
    capnp::MallocMessageBuilder message;
    auto root_message = message.initRoot<control::ClientMessage>();
    auto request =
        subscribe ? root_message.initWeightsSubscribe() : root_message.initWeightsAdvertise();
    request.setModel(model);
    request.setToken(
        kj::arrayPtr(reinterpret_cast<const kj::byte*>(parts.token), sizeof(parts.token)));
    request.setRootInstance(parts.root_instance);
    auto addresses = request.initRootAddresses(static_cast<unsigned>(parts.root_addresses.size()));
    for (unsigned i = 0; i < addresses.size(); ++i) addresses.set(i, parts.root_addresses[i]);
    Reply reply = ClientContext::get().control().call(message);
    capnp::FlatArrayMessageReader reader(reply.words, plexus::common::untrusted_reader_options());
    auto root = reader.getRoot<control::DaemonMessage>();
    if (subscribe ? !root.isWeightsSubscribeReply() : !root.isWeightsAdvertiseReply()) {
      return refused(call, root);
    }
    return PLEXUS_SUCCESS;
  });
}

}  // namespace

plexus_result_t plexus_weights_key(const char* model, plexus_unique_id_t* key) {
  if (model == nullptr || key == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_weights_key: model or key is NULL");
  }
  if (std::string why = make_unique_id(key); !why.empty()) {
    return fail(PLEXUS_ERR_SYSTEM, "plexus_weights_key: " + why);
  }
  UniqueIdParts parts;
  if (read_unique_id(*key, &parts).empty() && parts.root_instance == 0) {
    return fail(PLEXUS_ERR_DAEMON_UNAVAILABLE,
                "plexus_weights_key: no plexusd answered on this node to publish from");
  }
  return send_key("plexus_weights_key", false, *key, model);
}

plexus_result_t plexus_weights_subscribe(const plexus_unique_id_t* key, const char* local_name) {
  if (key == nullptr || local_name == nullptr) {
    return fail(PLEXUS_ERR_INVALID_ARGUMENT, "plexus_weights_subscribe: key or local_name is NULL");
  }
  return send_key("plexus_weights_subscribe", true, *key, local_name);
}

}  // extern "C"
