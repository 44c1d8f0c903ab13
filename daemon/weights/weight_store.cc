#include "daemon/weights/weight_store.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace plexus::daemon::weights {

namespace {

constexpr uint64_t kTensorAlign = 64;

uint64_t align_up(uint64_t n) { return (n + kTensorAlign - 1) / kTensorAlign * kTensorAlign; }

std::string what(const std::string& model, uint64_t version, uint32_t shard, uint32_t shards) {
  std::string text = "version " + std::to_string(version) + " of model '" + model + "'";
  if (shards > 1) {
    text += " (shard " + std::to_string(shard) + " of " + std::to_string(shards) + ")";
  }
  return text;
}

}  // namespace

Layout lay_out(const std::vector<TensorSpec>& tensors) {
  Layout out;
  out.offsets.reserve(tensors.size());
  for (const TensorSpec& t : tensors) {
    out.offsets.push_back(out.bytes);
    out.bytes = align_up(out.bytes + t.bytes);
  }
  return out;
}

WeightStore::WeightStore(Settings settings)
    : settings_(settings), memory_(std::make_shared<WeightMemory>(settings.max_bytes)) {}

std::string WeightStore::owned_by(const std::string& model_name, const Model& model, uint32_t uid) {
  if (uid == model.owner_uid || uid == 0) return {};
  return "model '" + model_name + "' belongs to uid " + std::to_string(model.owner_uid) +
         ", and this process runs as uid " + std::to_string(uid);
}

std::string WeightStore::check_publish(const std::string& model_name, const Model* model,
                                       uint64_t version, uint32_t shard, uint32_t shards,
                                       uint32_t uid) const {
  if (version == 0) return "version 0 is not a version: versions count from 1";
  if (version >= kMaxVersion) {
    return "versions are below 2^62 (the relay between nodes carries 62 bits)";
  }
  if (shards == 0 || shards > kMaxShards || shard >= shards) {
    return "shard " + std::to_string(shard) + " of " + std::to_string(shards) +
           ": a version has 1 to " + std::to_string(kMaxShards) + " shards, numbered from 0";
  }
  if (model == nullptr) {
    if (models_.size() >= kMaxModels) {
      return "this node already holds " + std::to_string(kMaxModels) + " models";
    }
    return {};
  }
  if (std::string why = owned_by(model_name, *model, uid); !why.empty()) return why;
  if (version <= model->newest) {
    return "it is not newer than the model's newest complete version, " +
           std::to_string(model->newest) + " (versions only go forward)";
  }
  auto building = model->building.find(version);
  if (building == model->building.end()) {
    if (model->building.size() >= kMaxBuildingVersions) {
      return std::to_string(model->building.size()) +
             " versions of the model are being published already (finish or fail them first)";
    }
    return {};
  }
  if (building->second.shards != shards) {
    return "its publisher says the version has " + std::to_string(shards) +
           " shard(s), and an earlier shard said " + std::to_string(building->second.shards);
  }
  if (building->second.in.count(shard) != 0 || building->second.coming.count(shard) != 0) {
    return "shard " + std::to_string(shard) + " of it was published already";
  }
  return {};
}

common::Result<std::shared_ptr<PendingShard>> WeightStore::publish_begin(
    const std::string& model_name, uint64_t version, uint32_t shard, uint32_t shards, uint32_t uid,
    const std::vector<TensorSpec>& tensors, bool& for_memory) {
  for_memory = false;
  const std::string subject = what(model_name, version, shard, shards);
  auto found = models_.find(model_name);
  Model* model = found == models_.end() ? nullptr : &found->second;
  if (std::string why = check_publish(model_name, model, version, shard, shards, uid);
      !why.empty()) {
    return common::fail(subject + " refused: " + why);
  }
  // The shard's layout, and its names against one another and the version's other shards.
  auto data = std::make_shared<Shard>();
  data->tensors.reserve(tensors.size());
  std::set<std::string_view> names;
  const Building* building = nullptr;
  if (model != nullptr) {
    auto b = model->building.find(version);
    if (b != model->building.end()) building = &b->second;
  }
  for (const TensorSpec& t : tensors) {
    if (!names.insert(t.name).second) {
      return common::fail(subject + " refused: it names tensor '" + t.name + "' twice");
    }
    if (building != nullptr && building->names.count(t.name) != 0) {
      return common::fail(subject + " refused: tensor '" + t.name +
                          "' is in another shard of the version already");
    }
    // A pool holds at most 2^46 bytes (--max-pool-bytes is far below): the sums cannot wrap.
    if (t.bytes > kMaxShardBytes) {
      return common::fail(subject + " refused: tensor '" + t.name + "' is too large");
    }
  }
  const Layout layout = lay_out(tensors);
  if (layout.bytes > kMaxShardBytes) {
    return common::fail(subject + " refused: a shard holds at most " +
                        std::to_string(kMaxShardBytes >> 30) + " GiB");
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    data->tensors.push_back(Shard::Tensor{
        .name = tensors[i].name, .offset = layout.offsets[i], .bytes = tensors[i].bytes});
  }
  const uint64_t bytes = layout.bytes;
  auto buffer = memory_->allocate(bytes);
  if (!buffer && model != nullptr && makes_room(*model, bytes)) {
    // The oldest kept version goes when this one completes anyway: let it go now.
    model->complete.erase(model->complete.begin());
    model->oldest_kept = model->complete.empty() ? version : model->complete.begin()->first;
    buffer = memory_->allocate(bytes);
  }
  if (!buffer) {
    for_memory = true;
    return common::fail(subject + " refused: " + buffer.error() +
                        " (raise --weight-store-bytes, keep fewer versions with "
                        "--weight-versions, or let pulls of old versions finish)");
  }
  data->buffer = buffer.take();
  if (model == nullptr) {
    model = &models_[model_name];
    model->owner_uid = uid;
  }
  Building& b = model->building[version];
  b.shards = shards;
  for (const Shard::Tensor& t : data->tensors) b.names.insert(t.name);
  b.coming[shard] = data;
  return std::make_shared<PendingShard>(PendingShard{.model = model_name,
                                                     .version = version,
                                                     .shard = shard,
                                                     .shards = shards,
                                                     .owner_uid = uid,
                                                     .data = std::move(data)});
}

common::Result<uint64_t> WeightStore::publish_done(const std::shared_ptr<PendingShard>& pending) {
  const std::string subject =
      what(pending->model, pending->version, pending->shard, pending->shards);
  auto model = models_.find(pending->model);
  if (model == models_.end()) return common::fail(subject + ": the model was dropped meanwhile");
  auto building = model->second.building.find(pending->version);
  if (building == model->second.building.end() ||
      building->second.coming.erase(pending->shard) == 0) {
    return common::fail(subject + " was dropped while it was copied in: versions " +
                        kept(pending->model) + " are newer");
  }
  Building& b = building->second;
  b.in[pending->shard] = pending->data;
  ++model->second.publishes;
  if (b.in.size() < b.shards) return uint64_t{0};
  model->second.complete[pending->version] = assemble(pending->version, b);
  model->second.newest = std::max(model->second.newest, pending->version);
  model->second.building.erase(building);
  evict(model->second);
  return pending->version;
}

void WeightStore::publish_failed(const std::shared_ptr<PendingShard>& pending) {
  auto model = models_.find(pending->model);
  if (model == models_.end()) return;
  auto building = model->second.building.find(pending->version);
  if (building == model->second.building.end()) return;
  if (auto shard = building->second.coming.find(pending->shard);
      shard != building->second.coming.end()) {
    for (const Shard::Tensor& t : shard->second->tensors) building->second.names.erase(t.name);
    building->second.coming.erase(shard);
  }
  if (building->second.coming.empty() && building->second.in.empty()) {
    model->second.building.erase(building);
  }
  // A model nothing was ever completed in is forgotten (its name free again).
  if (model->second.newest == 0 && model->second.building.empty()) models_.erase(model);
}

bool WeightStore::adopt(const std::string& model_name, uint32_t uid,
                        std::shared_ptr<const Version> version) {
  auto found = models_.find(model_name);
  if (found == models_.end()) {
    if (models_.size() >= kMaxModels) return false;
    found = models_.emplace(model_name, Model{}).first;
    found->second.owner_uid = uid;
  }
  Model& model = found->second;
  if (!owned_by(model_name, model, uid).empty() || version->number <= model.newest) return false;
  model.newest = version->number;
  model.complete[version->number] = std::move(version);
  ++model.publishes;
  evict(model);
  return true;
}

bool WeightStore::makes_room(const Model& model, uint64_t bytes) const {
  // Never the newest: pulls of the latest must find one while the next is copied in.
  if (model.complete.size() < 2 || model.complete.size() < settings_.versions_kept) return false;
  const std::shared_ptr<const Version>& oldest = model.complete.begin()->second;
  if (oldest.use_count() > 1) return false;  // a pull copies out of it: dropping frees nothing
  uint64_t freed = 0;
  for (const auto& part : oldest->parts) freed += WeightMemory::counted(part->buffer->size());
  const uint64_t held = memory_->held();
  return held >= freed && held - freed <= memory_->cap() &&
         bytes <= memory_->cap() - (held - freed);
}

std::shared_ptr<const Version> WeightStore::assemble(uint64_t number, Building& building) const {
  auto version = std::make_shared<Version>();
  version->number = number;
  version->shards = building.shards;
  version->completed = Clock::now();
  for (auto& [index, shard] : building.in) {
    const auto shard_index = static_cast<uint32_t>(version->parts.size());
    for (size_t i = 0; i < shard->tensors.size(); ++i) {
      version->index.emplace(shard->tensors[i].name,
                             std::make_pair(shard_index, static_cast<uint32_t>(i)));
      version->bytes += shard->tensors[i].bytes;
    }
    version->parts.push_back(std::move(shard));
  }
  return version;
}

void WeightStore::evict(Model& model) {
  while (model.complete.size() > settings_.versions_kept)
    model.complete.erase(model.complete.begin());
  if (model.complete.empty()) return;
  model.oldest_kept = model.complete.begin()->first;
  if (model.complete.size() < settings_.versions_kept) return;
  // A version still building below every kept one would be dropped as it completed.
  std::erase_if(model.building, [&](const auto& b) { return b.first < model.oldest_kept; });
}

std::shared_ptr<const Version> WeightStore::find(const std::string& model, uint64_t number) const {
  auto it = models_.find(model);
  if (it == models_.end() || it->second.complete.empty()) return nullptr;
  if (number == 0) return it->second.complete.rbegin()->second;
  auto version = it->second.complete.find(number);
  return version == it->second.complete.end() ? nullptr : version->second;
}

uint64_t WeightStore::latest(const std::string& model) const {
  auto it = models_.find(model);
  if (it == models_.end() || it->second.complete.empty()) return 0;
  return it->second.complete.rbegin()->first;
}

std::string WeightStore::refuse_reader(const std::string& model, uint32_t uid) const {
  auto it = models_.find(model);
  return it == models_.end() ? std::string() : owned_by(model, it->second, uid);
}

bool WeightStore::dropped(const std::string& model, uint64_t number) const {
  auto it = models_.find(model);
  return it != models_.end() && number > 0 && number < it->second.oldest_kept;
}

std::string WeightStore::kept(const std::string& model) const {
  auto it = models_.find(model);
  std::string text;
  if (it == models_.end()) return "none";
  for (const auto& [number, version] : it->second.complete) {
    text += (text.empty() ? "" : ", ") + std::to_string(number);
  }
  return text.empty() ? "none" : text;
}

void WeightStore::count_pull(const std::string& model, uint64_t bytes) {
  auto it = models_.find(model);
  if (it == models_.end()) return;
  ++it->second.pulls;
  it->second.pulled_bytes += bytes;
}

std::vector<ModelSummary> WeightStore::summary() const {
  std::vector<ModelSummary> out;
  const Clock::time_point now = Clock::now();
  for (const auto& [name, model] : models_) {
    ModelSummary s{.name = name,
                   .owner_uid = model.owner_uid,
                   .versions = {},
                   .publishes = model.publishes,
                   .pulls = model.pulls,
                   .pulled_bytes = model.pulled_bytes};
    for (const auto& [number, v] : model.complete) {
      s.versions.push_back({.number = number,
                            .bytes = v->bytes,
                            .shards = v->shards,
                            .shards_in = v->shards,
                            .complete = true,
                            .age_s = std::chrono::duration<double>(now - v->completed).count()});
    }
    for (const auto& [number, b] : model.building) {
      uint64_t bytes = 0;
      for (const auto& [index, shard] : b.in) {
        for (const Shard::Tensor& t : shard->tensors) bytes += t.bytes;
      }
      s.versions.push_back({.number = number,
                            .bytes = bytes,
                            .shards = b.shards,
                            .shards_in = static_cast<uint32_t>(b.in.size()),
                            .complete = false,
                            .age_s = 0});
    }
    std::sort(s.versions.begin(), s.versions.end(),
              [](const auto& a, const auto& b) { return a.number < b.number; });
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace plexus::daemon::weights
