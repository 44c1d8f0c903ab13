// The node's weight store: named models, each a series of versions; a version is a set of
// named tensors, published as one or more shards (every trainer rank its own), and complete
// once every shard is in. A complete version is immutable: a pull copies out of it while it
// is held by a shared pointer, so it never sees a mix of two versions, and eviction only
// drops the store's own hold. The store keeps each model's newest `versions_kept` complete
// versions (and those still being published) under WeightMemory's cap.
//
// Control thread only (WeightService): the copies in and out run on WeightCopier's thread
// over buffers they hold, and what they finish comes back here by a post.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/weights/weight_memory.h"

namespace plexus::daemon::weights {

using Clock = std::chrono::steady_clock;

// Bounds on what one request may describe (untrusted: a client's).
inline constexpr size_t kMaxModelNameBytes = 256;
inline constexpr size_t kMaxTensorNameBytes = 1024;
inline constexpr size_t kMaxTensorsPerShard = 1 << 16;
inline constexpr uint32_t kMaxShards =
    4095;  // the relay's step has 12 bits, one value its header's
// A shard's buffer: 512 GiB, what the relay's range numbers reach (transports/wire/frame_views.h).
inline constexpr uint64_t kMaxShardBytes = uint64_t{1} << 39;
inline constexpr size_t kMaxModels = 256;
// Versions are numbered below this: the relay's frames carry 62 bits of it.
inline constexpr uint64_t kMaxVersion = uint64_t{1} << 62;
// Versions of one model being published at once (a trainer's steps overlap by one or two).
inline constexpr size_t kMaxBuildingVersions = 4;

struct TensorSpec {
  std::string name;
  uint64_t bytes = 0;
};

// Tensors laid out one after the other, each at a 64-byte aligned offset: their offsets and
// the bytes the whole takes (a shard's buffer, here and on every node it is relayed to).
struct Layout {
  std::vector<uint64_t> offsets;
  uint64_t bytes = 0;
};
Layout lay_out(const std::vector<TensorSpec>& tensors);

// One shard's tensors, laid out one after the other (64-byte aligned) in its buffer.
struct Shard {
  struct Tensor {
    std::string name;
    uint64_t offset = 0;  // in `buffer`
    uint64_t bytes = 0;
  };
  std::vector<Tensor> tensors;
  std::shared_ptr<shm::Mapping> buffer;
};

// A version as pulls see it: complete, never written again.
struct Version {
  uint64_t number = 0;
  uint32_t shards = 0;
  uint64_t bytes = 0;
  Clock::time_point completed;
  std::vector<std::shared_ptr<const Shard>> parts;  // by shard index
  // Where each tensor is: its shard and index there, by name.
  std::map<std::string, std::pair<uint32_t, uint32_t>, std::less<>> index;
};

// A shard being copied in: the copy writes `shard->buffer`, then publish_done() or
// publish_failed() takes it back.
struct PendingShard {
  std::string model;
  uint64_t version = 0;
  uint32_t shard = 0;
  uint32_t shards = 0;
  uint32_t owner_uid = 0;
  std::shared_ptr<Shard> data;
};

// What plexusctl models and the metrics show of one model.
struct ModelSummary {
  std::string name;
  uint32_t owner_uid = 0;
  struct VersionSummary {
    uint64_t number = 0;
    uint64_t bytes = 0;
    uint32_t shards = 0;
    uint32_t shards_in = 0;
    bool complete = false;
    double age_s = 0;  // since it was completed (0 while incomplete)
  };
  std::vector<VersionSummary> versions;  // oldest first
  uint64_t publishes = 0;
  uint64_t pulls = 0;
  uint64_t pulled_bytes = 0;
};

class WeightStore {
 public:
  struct Settings {
    uint64_t max_bytes = 0;
    uint32_t versions_kept = 0;
  };
  explicit WeightStore(Settings settings);

  // A shard of `version` of `model` begins: checks it against the model (its owner, its
  // newest complete version, the shards already in) and takes its memory under the cap, or
  // says why not, naming the model, the version and what to change (`for_memory` set when
  // it is the cap or the system's memory that refuses it).
  common::Result<std::shared_ptr<PendingShard>> publish_begin(
      const std::string& model, uint64_t version, uint32_t shard, uint32_t shards, uint32_t uid,
      const std::vector<TensorSpec>& tensors, bool& for_memory);
  // The shard's bytes are in: the number of the version this completed (0 if the version
  // still waits for shards), or why it was not kept (the version was dropped meanwhile).
  common::Result<uint64_t> publish_done(const std::shared_ptr<PendingShard>& pending);
  // The copy in failed: the shard is forgotten (a version left waiting for it can be
  // published again from the start by every shard).
  void publish_failed(const std::shared_ptr<PendingShard>& pending);

  // A whole version that came from another node (the relay filled its buffers) becomes
  // `model`'s newest, the model made (owned by `uid`) if it is new here; false when it is not
  // newer than the model's newest (it came late, or twice), the model is another user's, or
  // the store holds kMaxModels models.
  bool adopt(const std::string& model, uint32_t uid, std::shared_ptr<const Version> version);

  // The newest complete version of `model` (0: none), or `number` if it is complete and kept.
  std::shared_ptr<const Version> find(const std::string& model, uint64_t number) const;
  // The newest complete version's number, 0 if none (or no such model).
  uint64_t latest(const std::string& model) const;
  // Why `uid` may not read `model` ("" if it may, or if there is no such model yet).
  std::string refuse_reader(const std::string& model, uint32_t uid) const;
  // Whether `number` of `model` is below every version kept now (a pull of it can never be
  // served), and which are kept now ("5, 6").
  bool dropped(const std::string& model, uint64_t number) const;
  std::string kept(const std::string& model) const;
  void count_pull(const std::string& model, uint64_t bytes);

  std::vector<ModelSummary> summary() const;
  // Where versions' buffers come from (the relay allocates a version it receives here).
  const std::shared_ptr<WeightMemory>& memory() const { return memory_; }
  uint64_t held_bytes() const { return memory_->held(); }
  uint64_t spare_bytes() const { return memory_->spare(); }
  const Settings& settings() const { return settings_; }

 private:
  struct Building {  // a version whose shards are still coming
    uint32_t shards = 0;
    std::set<std::string, std::less<>> names;           // every shard's tensors, in or coming
    std::map<uint32_t, std::shared_ptr<Shard>> in;      // copied in
    std::map<uint32_t, std::shared_ptr<Shard>> coming;  // being copied
  };
  struct Model {
    uint32_t owner_uid = 0;
    std::map<uint64_t, std::shared_ptr<const Version>> complete;
    std::map<uint64_t, Building> building;
    uint64_t oldest_kept = 0;  // versions below it that were complete are dropped
    uint64_t newest = 0;       // the newest version ever complete: publishes go past it
    uint64_t publishes = 0;
    uint64_t pulls = 0;
    uint64_t pulled_bytes = 0;
  };

  static std::string owned_by(const std::string& model_name, const Model& model, uint32_t uid);
  std::string check_publish(const std::string& model_name, const Model* model, uint64_t version,
                            uint32_t shard, uint32_t shards, uint32_t uid) const;
  // Whether dropping the model's oldest kept version now (it falls out as the one being
  // published completes) frees room for `bytes`: nothing else holds it, and it is enough.
  bool makes_room(const Model& model, uint64_t bytes) const;
  // Drops what falls out of the newest versions_kept complete ones (and versions still
  // building that are older than every kept one).
  void evict(Model& model);
  std::shared_ptr<const Version> assemble(uint64_t number, Building& building) const;

  Settings settings_;
  std::shared_ptr<WeightMemory> memory_;  // shared with the relay, which fills versions too
  std::map<std::string, Model, std::less<>> models_;
};

}  // namespace plexus::daemon::weights
