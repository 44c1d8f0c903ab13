#include "python/plexus_torch/process_group_plexus.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <utility>

#include "python/plexus_torch/collective_tag.h"
#include "python/plexus_torch/gil.h"
#include "python/plexus_torch/tensor_types.h"

namespace plexus::torch_backend {
namespace {

constexpr const char* kUniqueIdKey = "plexus_unique_id";

}  // namespace

ProcessGroupPlexus::ProcessGroupPlexus(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout) {
  // Rank 0 makes the communicator's id and hands it out through the Store (a PrefixStore
  // of its own for each group, so the key never collides).
  plexus_unique_id_t id;
  if (rank == 0) {
    TORCH_CHECK(plexus_get_unique_id(&id) == PLEXUS_SUCCESS,
                "ProcessGroupPlexus: plexus_get_unique_id failed: ", plexus_get_last_error());
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    const std::vector<uint8_t> bytes = store->get(kUniqueIdKey);
    TORCH_CHECK(bytes.size() == sizeof(id), "ProcessGroupPlexus: the Store holds a unique id of ",
                bytes.size(), " bytes, not ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  const auto timeout_ms = std::min<int64_t>(timeout.count(), std::numeric_limits<int>::max());
  const plexus_result_t r =
      plexus_comm_init_rank_timeout(&comm_, size, id, rank, static_cast<int>(timeout_ms));
  TORCH_CHECK(r == PLEXUS_SUCCESS, "ProcessGroupPlexus: rank ", rank, " of ", size,
              " could not join the communicator: ", plexus_get_last_error());
  start_progress();
}

ProcessGroupPlexus::ProcessGroupPlexus(plexus_comm_t comm, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_(timeout), comm_(comm) {
  start_progress();
}

void ProcessGroupPlexus::start_progress() {
  progress_ = std::make_unique<Progress>([this](const PlexusWork& work) {
    std::lock_guard lock(comm_mutex_);
    if (comm_ == nullptr) return;
    TORCH_WARN("ProcessGroupPlexus: ", work.what(), " did not complete within the timeout of ",
               timeout_.count(), " ms; aborting the communicator");
    plexus_comm_abort(comm_);
    comm_ = nullptr;
  });
}

ProcessGroupPlexus::~ProcessGroupPlexus() {
  // Every queued work completes first. Python code dropping the group holds the GIL here,
  // and the progress thread may need it meanwhile (dropping the last reference to a
  // tensor Python owns): let it go while joining.
  if (progress_->on_runner_thread()) {
    // Dropped by a future's callback on the progress thread itself, which cannot join
    // itself: both threads end on their own, and the Progress they use is left to them
    // (a few hundred bytes, once). Works still queued would be waited for by this very
    // thread: abort them rather than wait (the one completing now is out of the queue).
    const bool pending = progress_->queued() > 0;
    progress_->stop_detached();
    (void)progress_.release();  // intentionally leaked, see above
    std::lock_guard lock(comm_mutex_);
    if (comm_ != nullptr && pending) {
      plexus_comm_abort(comm_);
    } else if (comm_ != nullptr) {
      plexus_comm_destroy(comm_);
    }
    comm_ = nullptr;
    return;
  }
  without_gil([this] { progress_.reset(); });
  std::lock_guard lock(comm_mutex_);
  if (comm_ != nullptr) plexus_comm_destroy(comm_);
  comm_ = nullptr;
}

// `request` by reference: read after the call that fills it (argument order is unspecified).
void ProcessGroupPlexus::add(PlexusWork& work, plexus_result_t result,
                             const plexus_request_t& request) {
  if (result != PLEXUS_SUCCESS) {
    if (work.submit_error.empty()) work.submit_error = plexus_get_last_error();
    return;
  }
  work.requests.push_back(request);
}

at::Tensor ProcessGroupPlexus::writable(PlexusWork& work, const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  at::Tensor buffer = t.contiguous();
  work.keep.push_back(buffer);
  work.on_success.push_back([t, buffer]() mutable { t.copy_(buffer); });
  return buffer;
}

at::Tensor ProcessGroupPlexus::readable(PlexusWork& work, const at::Tensor& t) {
  if (t.is_contiguous()) return t;
  at::Tensor buffer = t.contiguous();
  work.keep.push_back(buffer);
  return buffer;
}

void ProcessGroupPlexus::check_rank(int rank, const char* what) const {
  TORCH_CHECK(rank >= 0 && rank < getSize(), "ProcessGroupPlexus: ", what, " rank ", rank,
              " is not in this group of ", getSize());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::run(
    const char* name, c10d::OpType type, std::vector<at::Tensor> outputs,
    const std::function<void(PlexusWork&, plexus_comm_t)>& issue) {
  auto work =
      c10::make_intrusive<PlexusWork>(getRank(), type,
                                      std::string(name) + " on rank " + std::to_string(getRank()) +
                                          " of " + std::to_string(getSize()),
                                      std::move(outputs), PlexusWork::Clock::now() + timeout_);
  {
    std::lock_guard lock(comm_mutex_);
    TORCH_CHECK(comm_ != nullptr, "ProcessGroupPlexus: ", work->what(),
                ": the communicator was aborted after an earlier operation timed out");
    // The group always ends: an exception while building the calls (out of memory) submits
    // what was queued, the work still waits for it, and the caller gets the exception.
    plexus_group_start();
    try {
      issue(*work, comm_);
    } catch (const std::exception& e) {
      plexus_group_end();
      work->submit_error = e.what();
      progress_->enqueue(work);
      throw;
    }
    plexus_group_end();
  }
  progress_->enqueue(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  check_single(tensors, "broadcast");
  check_rank(static_cast<int>(opts.rootRank), "broadcast root");
  const at::Tensor t = tensors[0];
  return run("broadcast", c10d::OpType::BROADCAST, tensors, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor buf = writable(w, t);
    plexus_request_t req = nullptr;
    add(w,
        plexus_broadcast(buf.data_ptr(), buf.data_ptr(), elements(buf), plexus_dtype(buf),
                         static_cast<int>(opts.rootRank), c, &req),
        req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  check_single(tensors, "allreduce");
  const at::Tensor t = tensors[0];
  const plexus_redop_t op = plexus_redop(opts.reduceOp, t.scalar_type());
  return run("allreduce", c10d::OpType::ALLREDUCE, tensors, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor buf = writable(w, t);
    plexus_request_t req = nullptr;
    add(w,
        plexus_allreduce(buf.data_ptr(), buf.data_ptr(), elements(buf), plexus_dtype(buf), op, c,
                         &req),
        req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  for (const at::Tensor& t : tensors) check_cpu(t, "allreduce_coalesced");
  std::vector<plexus_redop_t> ops;
  for (const at::Tensor& t : tensors) ops.push_back(plexus_redop(opts.reduceOp, t.scalar_type()));
  return run("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors,
             [&](PlexusWork& w, plexus_comm_t c) {
               for (size_t i = 0; i < tensors.size(); ++i) {
                 at::Tensor buf = writable(w, tensors[i]);
                 plexus_request_t req = nullptr;
                 add(w,
                     plexus_allreduce(buf.data_ptr(), buf.data_ptr(), elements(buf),
                                      plexus_dtype(buf), ops[i], c, &req),
                     req);
               }
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  check_single(tensors, "reduce");
  check_rank(static_cast<int>(opts.rootRank), "reduce root");
  const at::Tensor t = tensors[0];
  const plexus_redop_t op = plexus_redop(opts.reduceOp, t.scalar_type());
  return run("reduce", c10d::OpType::REDUCE, tensors, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor buf = writable(w, t);
    plexus_request_t req = nullptr;
    add(w,
        plexus_reduce(buf.data_ptr(), buf.data_ptr(), elements(buf), plexus_dtype(buf), op,
                      static_cast<int>(opts.rootRank), c, &req),
        req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  check_single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "ProcessGroupPlexus: allgather needs one output list of ", getSize(), " tensors");
  const at::Tensor in = inputs[0];
  for (const at::Tensor& o : outputs[0]) {
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "ProcessGroupPlexus: allgather outputs must match the input's size and type");
    check_cpu(o, "allgather");
  }
  std::vector<at::Tensor> list = outputs[0];
  return run("allgather", c10d::OpType::ALLGATHER, list, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor src = readable(w, in);
    at::Tensor flat = at::empty({static_cast<int64_t>(getSize()) * in.numel()}, in.options());
    w.keep.push_back(flat);
    const int64_t n = in.numel();
    w.on_success.push_back([list, flat, n]() mutable {
      for (size_t r = 0; r < list.size(); ++r) {
        list[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(list[r].sizes()));
      }
    });
    plexus_request_t req = nullptr;
    add(w,
        plexus_allgather(src.data_ptr(), flat.data_ptr(), elements(src), plexus_dtype(src), c,
                         &req),
        req);
  });
}

// One allgather per input, all in one libplexus group: outputs[r][i] gets rank r's inputs[i].
// Complex tensors go as their real and imaginary parts.
c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  auto real = [](const at::Tensor& t) { return t.is_complex() ? at::view_as_real(t) : t; };
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(),
              "ProcessGroupPlexus: allgather_coalesced needs an output list per rank (", getSize(),
              "), got ", outputs.size());
  std::vector<at::Tensor> all;
  for (size_t r = 0; r < outputs.size(); ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "ProcessGroupPlexus: allgather_coalesced ",
                "needs an output per input in each list (", inputs.size(), " inputs, list ", r,
                " has ", outputs[r].size(), ")");
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& o = outputs[r][i];
      TORCH_CHECK(o.numel() == inputs[i].numel() && o.scalar_type() == inputs[i].scalar_type(),
                  "ProcessGroupPlexus: allgather_coalesced outputs must match their input's ",
                  "size and type (input ", i, ")");
      check_cpu(real(o), "allgather_coalesced");
      all.push_back(o);
    }
  }
  return run("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED, all,
             [&](PlexusWork& w, plexus_comm_t c) {
               for (size_t i = 0; i < inputs.size(); ++i) {
                 at::Tensor src = readable(w, real(inputs[i]));
                 const int64_t n = src.numel();
                 at::Tensor flat = at::empty({static_cast<int64_t>(getSize()) * n}, src.options());
                 w.keep.push_back(flat);
                 std::vector<at::Tensor> column;
                 for (const auto& list : outputs) column.push_back(list[i]);
                 w.on_success.push_back([column, flat, n, real]() mutable {
                   for (size_t r = 0; r < column.size(); ++r) {
                     at::Tensor out = real(column[r]);
                     out.copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(out.sizes()));
                   }
                 });
                 plexus_request_t req = nullptr;
                 add(w,
                     plexus_allgather(src.data_ptr(), flat.data_ptr(), elements(src),
                                      plexus_dtype(src), c, &req),
                     req);
               }
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  check_gather_pair(output, input, "_allgather_base");
  return run("_allgather_base", c10d::OpType::_ALLGATHER_BASE, {output},
             [&](PlexusWork& w, plexus_comm_t c) { issue_allgather(w, c, output, input); });
}

void ProcessGroupPlexus::check_gather_pair(const at::Tensor& output, const at::Tensor& input,
                                           const char* what) const {
  check_cpu(input, what);
  check_cpu(output, what);
  TORCH_CHECK(
      output.numel() == input.numel() * getSize() && output.scalar_type() == input.scalar_type(),
      "ProcessGroupPlexus: ", what, " needs an output of ", getSize(),
      " times the input's elements, of its type");
}

void ProcessGroupPlexus::issue_allgather(PlexusWork& w, plexus_comm_t c, const at::Tensor& output,
                                         const at::Tensor& input) {
  at::Tensor src = readable(w, input);
  at::Tensor dst = writable(w, output);
  plexus_request_t req = nullptr;
  add(w,
      plexus_allgather(src.data_ptr(), dst.data_ptr(), elements(src), plexus_dtype(src), c, &req),
      req);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  check_single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  check_rank(root, "gather root");
  const bool is_root = getRank() == root;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "ProcessGroupPlexus: gather's root needs one output list of ", getSize(),
                " tensors");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "ProcessGroupPlexus: only gather's root takes output tensors");
  }
  std::vector<at::Tensor> list = is_root ? outputs[0] : std::vector<at::Tensor>{};
  const at::Tensor in = inputs[0];
  for (const at::Tensor& o : list) {
    check_cpu(o, "gather");
    TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                "ProcessGroupPlexus: gather outputs must match the input's size and type");
  }
  return run("gather", c10d::OpType::GATHER, list, [&](PlexusWork& w, plexus_comm_t c) {
    at::Tensor src = readable(w, in);
    plexus_request_t req = nullptr;
    add(w, send_part(src, root, c, &req), req);
    for (int r = 0; is_root && r < getSize(); ++r) {
      at::Tensor dst = writable(w, list[static_cast<size_t>(r)]);
      add(w, recv_part(dst, r, c, &req), req);
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  check_single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  check_rank(root, "scatter root");
  const bool is_root = getRank() == root;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "ProcessGroupPlexus: scatter's root needs one input list of ", getSize(),
                " tensors");
  }
  std::vector<at::Tensor> list = is_root ? inputs[0] : std::vector<at::Tensor>{};
  const at::Tensor out = outputs[0];
  for (const at::Tensor& t : list) {
    check_cpu(t, "scatter");
    TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
                "ProcessGroupPlexus: scatter inputs must match the output's size and type");
  }
  return run("scatter", c10d::OpType::SCATTER, outputs, [&](PlexusWork& w, plexus_comm_t c) {
    plexus_request_t req = nullptr;
    for (int r = 0; is_root && r < getSize(); ++r) {
      at::Tensor src = readable(w, list[static_cast<size_t>(r)]);
      add(w, send_part(src, r, c, &req), req);
    }
    at::Tensor dst = writable(w, out);
    add(w, recv_part(dst, root, c, &req), req);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "ProcessGroupPlexus: reduce_scatter needs one input list of ", getSize(), " tensors");
  const at::Tensor out = outputs[0];
  for (const at::Tensor& t : inputs[0]) {
    check_cpu(t, "reduce_scatter");
    TORCH_CHECK(t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
                "ProcessGroupPlexus: reduce_scatter inputs must match the output's size and type");
  }
  const plexus_redop_t op = plexus_redop(opts.reduceOp, out.scalar_type());
  std::vector<at::Tensor> list = inputs[0];
  return run("reduce_scatter", c10d::OpType::REDUCE_SCATTER, outputs,
             [&](PlexusWork& w, plexus_comm_t c) {
               std::vector<at::Tensor> flat_parts;
               for (const at::Tensor& t : list) flat_parts.push_back(t.reshape({-1}));
               at::Tensor flat = at::cat(flat_parts);
               w.keep.push_back(flat);
               at::Tensor dst = writable(w, out);
               plexus_request_t req = nullptr;
               add(w,
                   plexus_reducescatter(flat.data_ptr(), dst.data_ptr(), elements(dst),
                                        plexus_dtype(dst), op, c, &req),
                   req);
             });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_scatter_pair(output, input, "_reduce_scatter_base");
  const plexus_redop_t op = plexus_redop(opts.reduceOp, output.scalar_type());
  return run(
      "_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, {output},
      [&](PlexusWork& w, plexus_comm_t c) { issue_reduce_scatter(w, c, output, input, op); });
}

void ProcessGroupPlexus::check_scatter_pair(const at::Tensor& output, const at::Tensor& input,
                                            const char* what) const {
  check_cpu(input, what);
  check_cpu(output, what);
  TORCH_CHECK(
      input.numel() == output.numel() * getSize() && output.scalar_type() == input.scalar_type(),
      "ProcessGroupPlexus: ", what, " needs an input of ", getSize(),
      " times the output's elements, of its type");
}

void ProcessGroupPlexus::issue_reduce_scatter(PlexusWork& w, plexus_comm_t c,
                                              const at::Tensor& output, const at::Tensor& input,
                                              plexus_redop_t op) {
  at::Tensor src = readable(w, input);
  at::Tensor dst = writable(w, output);
  plexus_request_t req = nullptr;
  add(w,
      plexus_reducescatter(src.data_ptr(), dst.data_ptr(), elements(dst), plexus_dtype(dst), op, c,
                           &req),
      req);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /*opts*/) {
  check_cpu(input, "alltoall_base");
  check_cpu(output, "alltoall_base");
  TORCH_CHECK(input.scalar_type() == output.scalar_type(),
              "ProcessGroupPlexus: alltoall_base's input and output differ in type");
  const int n = getSize();
  // Rows along dimension 0; an empty split list means equal splits.
  auto offsets = [n](const at::Tensor& t, std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) {
      TORCH_CHECK(rows % n == 0, "ProcessGroupPlexus: alltoall_base's ", which, " has ", rows,
                  " rows, not a multiple of the group's ", n);
      splits.assign(static_cast<size_t>(n), rows / n);
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == n, "ProcessGroupPlexus: alltoall_base's ", which,
                " split sizes name ", splits.size(), " ranks, not ", n);
    TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows,
                "ProcessGroupPlexus: alltoall_base's ", which, " split sizes do not add up to its ",
                rows, " rows");
    std::vector<int64_t> start(static_cast<size_t>(n) + 1, 0);
    for (int r = 0; r < n; ++r) start[r + 1] = start[r] + splits[static_cast<size_t>(r)];
    return start;
  };
  const bool equal = output_splits.empty() && input_splits.empty();
  std::vector<int64_t> in_start = offsets(input, input_splits, "input");
  std::vector<int64_t> out_start = offsets(output, output_splits, "output");
  const int64_t in_rows = input.dim() == 0 ? 1 : input.size(0);
  const int64_t out_rows = output.dim() == 0 ? 1 : output.size(0);
  const int64_t row = in_rows == 0 ? 0 : input.numel() / in_rows;
  const int64_t out_row = out_rows == 0 ? 0 : output.numel() / out_rows;
  // Rows of the same width on both sides, and the output exactly as large as what arrives.
  TORCH_CHECK(in_rows == 0 || out_rows == 0 || row == out_row,
              "ProcessGroupPlexus: alltoall_base's input rows hold ", row,
              " elements, its output rows ", out_row);
  TORCH_CHECK(!equal || output.numel() == input.numel(), "ProcessGroupPlexus: alltoall_base's ",
              "output has ", output.numel(), " elements, its input ", input.numel());
  return run(
      "alltoall_base", c10d::OpType::ALLTOALL_BASE, {output}, [&](PlexusWork& w, plexus_comm_t c) {
        at::Tensor src = readable(w, input);
        at::Tensor dst = writable(w, output);
        const plexus_dtype_t dtype = plexus_dtype(src);
        const size_t element = plexus_dtype_size(dtype);
        plexus_request_t req = nullptr;
        if (equal) {
          add(w, plexus_alltoall(src.data_ptr(), dst.data_ptr(), elements(src) / n, dtype, c, &req),
              req);
          return;
        }
        auto* in = static_cast<char*>(src.data_ptr());
        auto* out = static_cast<char*>(dst.data_ptr());
        for (int r = 0; r < n; ++r) {
          const auto count = static_cast<size_t>(input_splits[r] * row);
          add(w,
              plexus_send_tagged(in + static_cast<size_t>(in_start[r] * row) * element, count,
                                 dtype, r, kCollectiveTag, c, &req),
              req);
        }
        for (int r = 0; r < n; ++r) {
          const auto count = static_cast<size_t>(output_splits[r] * row);
          add(w,
              plexus_recv_tagged(out + static_cast<size_t>(out_start[r] * row) * element, count,
                                 dtype, r, kCollectiveTag, nullptr, c, &req),
              req);
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& /*opts*/) {
  const int n = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "ProcessGroupPlexus: alltoall needs ", n, " input and ", n, " output tensors");
  for (int r = 0; r < n; ++r) {
    check_cpu(inputs[r], "alltoall");
    check_cpu(outputs[r], "alltoall");
  }
  return run("alltoall", c10d::OpType::ALLTOALL, outputs, [&](PlexusWork& w, plexus_comm_t c) {
    plexus_request_t req = nullptr;
    for (int r = 0; r < n; ++r) {
      at::Tensor src = readable(w, inputs[r]);
      add(w, send_part(src, r, c, &req), req);
    }
    for (int r = 0; r < n; ++r) {
      at::Tensor dst = writable(w, outputs[r]);
      add(w, recv_part(dst, r, c, &req), req);
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupPlexus::barrier(const c10d::BarrierOptions& /*opts*/) {
  at::Tensor token = at::zeros({1}, at::kByte);
  return run("barrier", c10d::OpType::BARRIER, {}, [&](PlexusWork& w, plexus_comm_t c) {
    w.keep.push_back(token);
    plexus_request_t req = nullptr;
    add(w,
        plexus_allreduce(token.data_ptr(), token.data_ptr(), 1, PLEXUS_UINT8, PLEXUS_MAX, c, &req),
        req);
  });
}

}  // namespace plexus::torch_backend
