#include "daemon/engine/gpu_staging.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "daemon/engine/internode_state.h"
#include "daemon/engine/job_admission.h"
#include "daemon/gpu/copy_group.h"
#include "daemon/gpu/direct_copy.h"
#include "daemon/gpu/reduce_kernel_args.h"
#include "shm/dtype.h"

namespace plexus::daemon {
namespace {

// How often a parked engine looks at the ready flags of entries held for GPU streams and
// at running copies: every 20 us at first, then a 64th of how long nothing has moved (a
// stream blocked for seconds costs ~1000 wakeups a second, not 50000), at most 1 ms.
constexpr std::chrono::nanoseconds kGpuLookFirst{20000};
constexpr std::chrono::nanoseconds kGpuLookMost{1000000};

}  // namespace

GpuStaging::GpuStaging(Settings settings, Hooks hooks, OpWatch& watch)
    : settings_(settings), hooks_(std::move(hooks)), watch_(watch) {}

common::Result<uint32_t> GpuStaging::register_memory(Session& session,
                                                     std::shared_ptr<gpu::DeviceMemory> device,
                                                     std::shared_ptr<gpu::DeviceMapping> mapping) {
  if (!device_) {
    device_ = std::move(device);
    device_->prefer_urgent_copies(urgent_);
  }
  const uint64_t bytes = mapping->bytes();
  const common::Result<uint32_t> region = session.gpu_regions.add_mapped(std::move(mapping));
  if (!region.ok()) {
    return common::fail("GPU allocation of " + std::to_string(bytes) + " bytes from " +
                        session.describe() + ": " + region.error());
  }
  return *region;
}

bool GpuStaging::moves_directly(const Comm& comm, const shm::ValidatedEntry& entry) {
  return moves_on_copy_engines(comm, entry) || reduces_on_gpu(comm, entry);
}

std::optional<std::chrono::nanoseconds> GpuStaging::look_again_in(bool sessions_wait) {
  if (!sessions_wait && direct_copies_.empty() && collectives_.empty() && input_waits_.empty()) {
    still_since_ = {};
    return std::nullopt;
  }
  const auto now = std::chrono::steady_clock::now();
  if (still_since_ == std::chrono::steady_clock::time_point{}) still_since_ = now;
  return std::clamp<std::chrono::nanoseconds>((now - still_since_) / 64, kGpuLookFirst,
                                              kGpuLookMost);
}

GpuStaging::Staged GpuStaging::stage(Session& session, Contribution& part, bool direct,
                                     bool job_capped) {
  if (!device_) {
    return {nullptr, PLEXUS_ERR_SYSTEM, "GPU region named, but no GPU allocation was registered"};
  }
  std::string error;
  if (direct) {
    common::Result<std::unique_ptr<gpu::StagedOp>> made =
        gpu::StagedOp::direct(session.gpu_regions, part.entry);
    if (!made.ok()) return {nullptr, PLEXUS_ERR_SYSTEM, made.error()};
    std::unique_ptr<gpu::StagedOp> op = made.take();
    op->order = ++session.staged_count;
    gpu::StagedOp* staged = op.get();
    session.staged_ops.emplace(part.entry.user_data, std::shared_ptr<gpu::StagedOp>(std::move(op)));
    return {staged};
  }
  error = refuse_staging(session, gpu::StagedOp::host_bytes_for(part.entry), 0, job_capped);
  if (!error.empty()) return {nullptr, PLEXUS_ERR_NO_MEMORY, std::move(error)};
  common::Result<std::unique_ptr<gpu::StagedOp>> made =
      gpu::StagedOp::stage(*device_, session.gpu_regions, part.entry, &part.send, &part.recv);
  if (!made.ok()) {
    // No host memory (the message says so), or a daemon bug.
    return {nullptr, PLEXUS_ERR_SYSTEM, "staging its GPU buffers: " + made.error()};
  }
  std::unique_ptr<gpu::StagedOp> op = made.take();
  op->charge_to(session.staging_budget());
  op->order = ++session.staged_count;
  still_since_ = {};  // its input copy is new work to watch
  gpu::StagedOp* staged = op.get();
  session.staged_ops.emplace(part.entry.user_data, std::shared_ptr<gpu::StagedOp>(std::move(op)));
  return {staged};
}

std::string GpuStaging::refuse_staging(const Session& session, uint64_t needed, uint64_t given_back,
                                       bool job_capped) const {
  if (needed == 0) return {};
  const uint64_t held = *session.staging_bytes - std::min(*session.staging_bytes, given_back);
  const uint64_t limit = settings_.max_staging_bytes;
  if (over_limit(held, needed, limit)) {
    return "staging its GPU buffers through host memory needs " + std::to_string(needed) +
           " bytes, and this process's GPU ops in flight hold " + std::to_string(held) +
           " of the " + std::to_string(limit) +
           " allowed (plexusd --max-gpu-staging-bytes; wait for earlier ops, or make them "
           "smaller)";
  }
  if (!job_capped || !session.job_counters()) return {};
  return daemon::refuse_staging(*session.job_counters(), needed, given_back);
}

bool GpuStaging::start_input(Session& session, gpu::StagedOp& op) {
  // Every earlier op whose result this op reads or overwrites is waited for first; only
  // then may a copy aside of an earlier op's input be taken (before, it could copy bytes
  // an op earlier still has yet to write).
  for (const auto& [user_data, other] : session.staged_ops) {
    if (other->order < op.order && (op.reads_result_of(*other) || op.overwrites_result_of(*other)))
      return false;
  }
  for (const auto& other : session.copying_back) {
    if (op.reads_result_of(*other.op) || op.overwrites_result_of(*other.op)) return false;
  }
  for (const auto& [user_data, other] : session.staged_ops) {
    if (other->order >= op.order || !op.overwrites_input_of(*other)) continue;
    // Not started: it waits for an earlier result itself, so its input is not yet there.
    if (!other->input_started()) return false;
    if (!other->matched() && !other->snapshot().taken()) {
      // A copy aside is never needed: refused, the writer waits for the send's match.
      std::string error = refuse_staging(session, other->snapshot_needs(), 0, true);
      if (error.empty()) error = other->snapshot_input(*device_, session.staging_budget());
      if (!error.empty() && other->snapshot().first_refusal()) {
        spdlog::warn(
            "{}: not copying a send's input to the host ({}): the op that overwrites it "
            "waits until the send is matched",
            session.describe(), error);
      }
    }
    if (!other->input_safe_to_overwrite()) return false;
  }
  op.start_input(*device_);
  return true;
}

std::shared_ptr<gpu::StagedOp> GpuStaging::direct_op(const Contribution& part) const {
  const Session& session = *part.session;
  auto it = session.staged_ops.find(part.entry.user_data);
  if (it == session.staged_ops.end() || !it->second->is_direct()) return nullptr;
  return it->second;
}

void GpuStaging::start_direct_copy(Contribution send, Contribution recv) {
  DirectCopy d;
  d.send_session = hooks_.shared_session(send.session);
  d.recv_session = hooks_.shared_session(recv.session);
  d.send_user_data = send.entry.user_data;
  d.recv_user_data = recv.entry.user_data;
  d.send_rank = send.rank;
  d.recv_rank = recv.rank;
  d.from = direct_op(send);
  d.to = direct_op(recv);
  still_since_ = {};  // a new copy to watch: look soon
  d.copy = gpu::copy_between(*device_, d.from.get(), send.send, d.to.get(), recv.recv,
                             recv.entry.recv.bytes);
  direct_copies_.push_back(std::move(d));
}

bool GpuStaging::advance_direct_copies() {
  bool moved = false;
  for (size_t i = 0; i < direct_copies_.size();) {
    const common::Result<bool> ended = direct_copies_[i].copy->done();
    if (ended.ok() && !*ended) {
      ++i;
      continue;
    }
    const std::string error = ended.error();
    DirectCopy d = std::move(direct_copies_[i]);
    direct_copies_.erase(direct_copies_.begin() + static_cast<std::ptrdiff_t>(i));
    moved = true;
    if (error.empty()) {
      hooks_.complete(d.send_session.get(), d.send_user_data, PLEXUS_SUCCESS, {});
      hooks_.complete(d.recv_session.get(), d.recv_user_data, PLEXUS_SUCCESS, {});
    } else {
      const std::string message = "moving rank " + std::to_string(d.send_rank) +
                                  "'s send to rank " + std::to_string(d.recv_rank) + ": " + error;
      hooks_.complete(d.send_session.get(), d.send_user_data, PLEXUS_ERR_SYSTEM, message);
      hooks_.complete(d.recv_session.get(), d.recv_user_data, PLEXUS_ERR_SYSTEM, message);
    }
  }
  return moved;
}

bool GpuStaging::reduces_on_gpu(const Comm& comm, const shm::ValidatedEntry& entry) {
  if (settings_.reduce_kernel_bytes == 0 || entry.opcode != shm::Opcode::kAllReduce ||
      comm.internode || comm.nranks() > gpu::kMaxKernelReduceRanks ||
      entry.recv.bytes < settings_.reduce_kernel_bytes ||
      entry.send.region == shm::kHostPoolRegion || entry.recv.region == shm::kHostPoolRegion ||
      !device_) {
    return false;
  }
  const std::string why = device_->reduce_kernel_unavailable();
  if (why.empty()) return true;
  if (!warned_kernel_unavailable_) {
    warned_kernel_unavailable_ = true;  // once: it will not change
    spdlog::warn("--gpu-reduce-kernel-bytes is set, but {}: reductions run on the host", why);
  }
  return false;
}

bool GpuStaging::moves_on_copy_engines(const Comm& comm, const shm::ValidatedEntry& entry) const {
  return shm::is_copy_collective(entry.opcode) && !comm.internode && device_ &&
         !(entry.opcode == shm::Opcode::kAllToAll && entry.in_place);
}

bool GpuStaging::has_direct_part(const PendingCollective& op) const {
  return std::any_of(op.parts.begin(), op.parts.end(), [&](const Contribution& part) {
    return part.session != nullptr && !part.session->staged_ops.empty() &&
           direct_op(part) != nullptr;
  });
}

namespace {

// "allgather #3 of communicator 0a1b2c3d", for logs and errors.
std::string collective_title(const shm::ValidatedEntry& entry, uint64_t seq, const Comm& comm) {
  return std::string(shm::opcode_name(static_cast<uint8_t>(entry.opcode))) + " #" +
         std::to_string(seq) + " of communicator " + token_prefix(comm.token());
}

}  // namespace

bool GpuStaging::stage_direct_parts_now(PendingCollective& op, const std::string& what) {
  for (size_t r = 0; r < op.parts.size(); ++r) {
    Contribution& part = op.parts[r];
    const std::shared_ptr<gpu::StagedOp> staged = direct_op(part);
    if (!staged) continue;
    Session& session = *part.session;
    // The process's and the job's staging budgets, as for an op staged when called (its
    // copy aside, if any, is given back first).
    plexus_result_t status = PLEXUS_ERR_NO_MEMORY;
    // Not the job's cap: the op was admitted whole when called, and its ranks are all in
    // (a refusal here would fail the op on every rank).
    std::string error = refuse_staging(session, gpu::StagedOp::host_bytes_for(part.entry),
                                       staged->snapshot().bytes(), false);
    if (error.empty()) {
      status = PLEXUS_ERR_SYSTEM;
      error =
          staged->stage_now(*device_, part.entry, &part.send, &part.recv, session.staging_budget());
    }
    if (error.empty()) continue;
    const std::string reason =
        what + ": rank " + std::to_string(r) + " (" + session.describe() + "): " + error;
    for (auto& p : op.parts) hooks_.complete(p.session, p.entry.user_data, status, reason);
    return false;
  }
  return true;
}

bool GpuStaging::start_collective(Comm& comm, PendingCollective& op, uint64_t seq) {
  if (!has_direct_part(op)) return false;
  return shm::is_copy_collective(op.parts[0].entry.opcode) ? start_copies(comm, op, seq)
                                                           : start_reduction(comm, op, seq);
}

void GpuStaging::start_copy_back(Session& session, uint64_t user_data,
                                 std::shared_ptr<gpu::StagedOp> op) {
  op->copy_back().start(*device_);
  session.copying_back.push_back({user_data, std::move(op)});
  still_since_ = {};
}

void GpuStaging::wait_for_input(const std::shared_ptr<Comm>& comm,
                                const std::shared_ptr<InternodeOp>& op,
                                std::shared_ptr<std::string> failure) {
  input_waits_.push_back({comm, op, std::move(failure)});
  still_since_ = {};
}

bool GpuStaging::advance() {
  bool moved = false;
  if (!direct_copies_.empty() && advance_direct_copies()) moved = true;
  if (!collectives_.empty() && advance_collectives()) moved = true;
  if (!input_waits_.empty() && resume_input_waits()) moved = true;
  if (moved) still_since_ = {};
  return moved;
}

bool GpuStaging::start_reduction(Comm& comm, PendingCollective& op, uint64_t seq) {
  const shm::ValidatedEntry& first = op.parts[0].entry;
  const std::string what = collective_title(first, seq, comm);
  std::vector<std::shared_ptr<gpu::StagedOp>> staged(op.parts.size());
  bool every_rank_on_gpu = true;
  for (size_t r = 0; r < op.parts.size(); ++r) {
    staged[r] = direct_op(op.parts[r]);
    // A copy aside is host memory: the kernel cannot read it.
    if (!staged[r] || staged[r]->snapshot().taken()) every_rank_on_gpu = false;
  }
  std::string why = "rank(s) with host buffers";
  if (every_rank_on_gpu) {
    std::vector<gpu::DeviceSpan> inputs, outputs;
    for (const auto& s : staged) {
      inputs.push_back(s->device_input());
      outputs.push_back(s->device_output());
    }
    gpu::DeviceReduction reduction{first.dtype, first.redop, first.count,
                                   static_cast<uint32_t>(comm.nranks())};
    common::Result<std::unique_ptr<gpu::CopyInFlight>> run =
        device_->start_reduce(reduction, inputs, outputs);
    if (run.ok()) {
      for (const auto& s : staged) s->mark_matched();
      hand_to_gpu(op, seq, std::move(staged), run.take(), "gpu-kernel",
                  "reduced on the GPU by plexusd's kernel");
      return true;
    }
    why = run.error();
  }
  if (!warned_kernel_fallback_) {
    warned_kernel_fallback_ = true;  // once: a job that mixes buffers does so every op
    spdlog::warn("{}: not reduced on the GPU ({}); staged through host memory instead", what, why);
  }
  return !stage_direct_parts_now(op, what);
}

bool GpuStaging::start_copies(Comm& comm, PendingCollective& op, uint64_t seq) {
  const shm::ValidatedEntry& first = op.parts[0].entry;
  const size_t n = op.parts.size();
  if (first.opcode == shm::Opcode::kAllToAll &&
      std::any_of(op.parts.begin(), op.parts.end(),
                  [](const Contribution& part) { return part.entry.in_place; })) {
    // That rank's blocks would be overwritten while other ranks' copies still read them:
    // the host runs it, from a snapshot of those blocks.
    return !stage_direct_parts_now(op, collective_title(first, seq, comm));
  }
  std::vector<std::shared_ptr<gpu::StagedOp>> staged(n);
  for (size_t r = 0; r < n; ++r) staged[r] = direct_op(op.parts[r]);
  const uint64_t block = first.count * shm::dtype_size(first.dtype);
  auto copies = std::make_unique<gpu::CopyGroup>();
  // A block from where rank `from`'s input lies (its GPU, its copy aside or its host pool)
  // to where rank `to`'s result goes: one copy, on the copy engines where a GPU is either
  // side.
  auto copy = [&](size_t from, uint64_t from_at, size_t to, uint64_t to_at) {
    copies->add(gpu::copy_part(*device_, staged[from].get(), op.parts[from].send, from_at,
                               staged[to].get(), op.parts[to].recv, to_at, block));
  };
  switch (first.opcode) {
    case shm::Opcode::kBroadcast:
      for (size_t to = 0; to < n; ++to) copy(static_cast<size_t>(first.peer), 0, to, 0);
      break;
    case shm::Opcode::kAllGather:
      for (size_t to = 0; to < n; ++to) {
        for (size_t from = 0; from < n; ++from) copy(from, 0, to, from * block);
      }
      break;
    case shm::Opcode::kAllToAll:
      for (size_t to = 0; to < n; ++to) {
        for (size_t from = 0; from < n; ++from) copy(from, to * block, to, from * block);
      }
      break;
    default:
      break;  // is_copy_collective: none other
  }
  for (const auto& s : staged) {
    if (s) s->mark_matched();
  }
  hand_to_gpu(op, seq, std::move(staged), std::move(copies), "copy-engines",
              "moved by the copy engines");
  return true;
}

void GpuStaging::hand_to_gpu(PendingCollective& op, uint64_t seq,
                             std::vector<std::shared_ptr<gpu::StagedOp>> staged,
                             std::unique_ptr<gpu::CopyInFlight> run, const char* algorithm,
                             const char* run_by) {
  GpuCollective g;
  for (const auto& part : op.parts) g.sessions.push_back(hooks_.shared_session(part.session));
  g.comm = op.parts[0].session->comms.at(op.parts[0].entry.comm).comm;
  g.op = std::move(op);
  g.seq = seq;
  g.staged = std::move(staged);
  g.run = std::move(run);
  g.algorithm = algorithm;
  g.run_by = run_by;
  collectives_.push_back(std::move(g));
  still_since_ = {};
}

bool GpuStaging::advance_collectives() {
  bool moved = false;
  for (size_t i = 0; i < collectives_.size();) {
    const common::Result<bool> ended = collectives_[i].run->done();
    if (ended.ok() && !*ended) {
      ++i;
      continue;
    }
    const std::string error = ended.error();
    GpuCollective g = std::move(collectives_[i]);
    collectives_.erase(collectives_.begin() + static_cast<std::ptrdiff_t>(i));
    moved = true;
    const shm::ValidatedEntry& first = g.op.parts[0].entry;
    const plexus_result_t status = error.empty() ? PLEXUS_SUCCESS : PLEXUS_ERR_SYSTEM;
    std::string message;
    if (error.empty()) {
      Comm& comm = *g.comm;
      watch_.count_completed(comm, first.recv.bytes * g.op.parts.size(), first);
    } else {
      message = collective_title(first, g.seq, *g.comm) + ", " + g.run_by + ": " + error;
    }
    if (watch_.timing()) watch_.record_finished(*g.comm, g.op, g.seq, g.algorithm, status);
    for (auto& part : g.op.parts)
      hooks_.complete(part.session, part.entry.user_data, status, message);
  }
  return moved;
}

bool GpuStaging::overwrites_arriving_input(Session& session, const gpu::StagedOp& op) {
  for (const auto& [user_data, other] : session.staged_ops) {
    if (other->order < op.order && op.overwrites_arriving_input_of(*other)) return true;
  }
  return false;
}

common::Result<GpuStaging::Turn> GpuStaging::may_leave_staging(Session& session, const Comm* comm,
                                                               gpu::StagedOp& op,
                                                               const shm::ValidatedEntry& entry) {
  // A collective between nodes goes as soon as its input has started coming in: each of its
  // slices waits for its own part (stage_slices).
  const bool runs_while_input_arrives = comm != nullptr && comm->internode != nullptr &&
                                        !shm::is_point_to_point(entry.opcode) &&
                                        op.input_started() && !op.is_direct();
  const common::Result<bool> ready = op.input_ready();
  if (ready.ok() && !*ready && !runs_while_input_arrives) return Turn::kWait;
  // A failed copy is asked again once the op may go: StagedOp keeps its error.
  if (overwrites_arriving_input(session, op)) return Turn::kWait;
  if (!ready.ok()) return common::fail(ready.error());
  return Turn::kLeave;
}

std::shared_ptr<std::string> GpuStaging::stage_slices(InternodeOp& op) {
  if (!device_) return nullptr;
  std::vector<std::shared_ptr<gpu::StagedOp>> staged;
  for (const Contribution& part : op.local_parts()) {
    auto it = part.session->staged_ops.find(part.entry.user_data);
    const bool on_gpu = it != part.session->staged_ops.end() && !it->second->is_direct();
    staged.push_back(on_gpu ? it->second : nullptr);
  }
  if (std::all_of(staged.begin(), staged.end(), [](const auto& s) { return s == nullptr; })) {
    return nullptr;
  }
  std::vector<std::string> names;
  for (const Contribution& part : op.local_parts()) {
    names.push_back(std::string(shm::opcode_name(static_cast<uint8_t>(part.entry.opcode))) +
                    " on rank " + std::to_string(part.rank) + " (" + part.session->describe() +
                    ")");
  }
  auto failure = std::make_shared<std::string>();
  InternodeOp::DeviceStaging staging;
  staging.input_in = [staged, names, failure](size_t i, uint64_t bytes) -> common::Result<bool> {
    if (!staged[i]) return true;
    const common::Result<bool> in = staged[i]->send_in_through(bytes);
    if (in.ok()) return *in;
    *failure = names[i] + ": copying its GPU input to the host: " + in.error();
    return common::fail(*failure);
  };
  staging.written = [staged, device = device_](size_t i, uint64_t offset, uint64_t bytes) {
    if (staged[i]) staged[i]->copy_back().start_part(*device, offset, bytes);
  };
  op.stage_through(std::move(staging));
  return failure;
}

bool GpuStaging::resume_input_waits() {
  bool moved = false;
  for (size_t i = 0; i < input_waits_.size();) {
    const std::shared_ptr<Comm> comm = input_waits_[i].comm.lock();
    const std::shared_ptr<InternodeOp> op =
        comm && comm->internode ? comm->internode->active : nullptr;
    if (!op || op != input_waits_[i].op.lock()) {
      input_waits_.erase(input_waits_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    op->resume();
    if (!input_waits_[i].failure->empty()) {
      const std::string reason = "collective #" + std::to_string(comm->internode->active_seq) +
                                 ": " + *input_waits_[i].failure;
      input_waits_.erase(input_waits_.begin() + static_cast<std::ptrdiff_t>(i));
      hooks_.fail_comm(*comm, PLEXUS_ERR_SYSTEM, reason);
      moved = true;
      continue;
    }
    if (!op->failure().empty()) hooks_.defer_failure(*comm, op->failure());
    if (op->network_done()) hooks_.network_done(comm);
    if (op->waiting_for_input()) {
      ++i;
      continue;
    }
    input_waits_.erase(input_waits_.begin() + static_cast<std::ptrdiff_t>(i));
    moved = true;
  }
  return moved;
}

bool GpuStaging::advance(Session& session) {
  bool moved = false;
  while (!session.removed && !session.staging.empty()) {
    const uint64_t user_data = session.staging.front().entry.user_data;
    std::string copy_error;
    if (auto it = session.staged_ops.find(user_data); it != session.staged_ops.end()) {
      gpu::StagedOp& op = *it->second;
      if (!op.input_started() && !start_input(session, op)) break;
      const shm::ValidatedEntry& entry = session.staging.front().entry;
      auto membership = session.comms.find(entry.comm);
      const Comm* comm =
          membership == session.comms.end() ? nullptr : membership->second.comm.get();
      const common::Result<Turn> turn = may_leave_staging(session, comm, op, entry);
      if (turn.ok() && *turn == Turn::kWait) break;
      copy_error = turn.error();
    }
    Contribution part = std::move(session.staging.front());
    session.staging.pop_front();
    moved = true;
    auto membership = session.comms.find(part.entry.comm);
    if (membership == session.comms.end()) {
      hooks_.complete(&session, user_data, PLEXUS_ERR_INVALID_ARGUMENT,
                      "communicator handle " + std::to_string(part.entry.comm) +
                          " was destroyed while the op's GPU input was being copied");
      continue;
    }
    Comm& comm = *membership->second.comm;
    if (comm.broken()) {
      hooks_.complete(&session, user_data, comm.broken_status(), comm.broken_reason());
      continue;
    }
    if (!copy_error.empty()) {
      // The other ranks would wait for this one forever: the communicator fails, naming it.
      const std::string reason =
          std::string(shm::opcode_name(static_cast<uint8_t>(part.entry.opcode))) + " on rank " +
          std::to_string(part.rank) + " (" + session.describe() +
          "): copying its GPU input to the host: " + copy_error;
      hooks_.complete(&session, user_data, PLEXUS_ERR_SYSTEM, reason);
      hooks_.fail_comm(comm, PLEXUS_ERR_SYSTEM, reason);
      continue;
    }
    hooks_.dispatch(comm, std::move(part));
  }
  for (size_t i = 0; i < session.copying_back.size() && !session.removed;) {
    const common::Result<bool> ended = session.copying_back[i].op->copy_back().done();
    if (ended.ok() && !*ended) {
      ++i;
      continue;
    }
    const std::string copy_error = ended.error();
    const uint64_t user_data = session.copying_back[i].user_data;
    session.copying_back.erase(session.copying_back.begin() + static_cast<std::ptrdiff_t>(i));
    moved = true;
    if (copy_error.empty()) {
      hooks_.finish_op(&session, user_data, PLEXUS_SUCCESS, {});
    } else {
      hooks_.finish_op(&session, user_data, PLEXUS_ERR_SYSTEM,
                       "copying the result back to the GPU: " + copy_error);
    }
  }
  return moved;
}

}  // namespace plexus::daemon
