// `import plexus_torch` registers torch.distributed's backend "plexus":
// dist.init_process_group("plexus", ...) and dist.new_group(..., backend="plexus") then make
// a ProcessGroupPlexus.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "python/plexus_torch/pool_tensors.h"
#include "python/plexus_torch/process_group_plexus.h"
#include "python/plexus_torch/weights.h"

namespace py = pybind11;
using plexus::torch_backend::BackendBase;
using plexus::torch_backend::ProcessGroupPlexus;

namespace {

// PLEXUS_TORCH_POOL_ALLOCATOR: unset (on from the first plexus group), 0 (never) or 1
// (from import); anything else is refused naming it, rather than read as one of them.
enum class PoolAllocatorSetting { kFromFirstGroup, kOff, kFromImport };

PoolAllocatorSetting pool_allocator_setting() {
  const char* v = std::getenv("PLEXUS_TORCH_POOL_ALLOCATOR");
  if (v == nullptr || v[0] == '\0') return PoolAllocatorSetting::kFromFirstGroup;
  if (std::string_view(v) == "0") return PoolAllocatorSetting::kOff;
  if (std::string_view(v) == "1") return PoolAllocatorSetting::kFromImport;
  throw std::invalid_argument(std::string("PLEXUS_TORCH_POOL_ALLOCATOR=") + v +
                              ": expected 0 (off) or 1 (on from import); unset, it is on from "
                              "the first plexus process group");
}

c10::intrusive_ptr<ProcessGroupPlexus> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
  // Read while the GIL is held: os.environ's writes on other threads take it too.
  const PoolAllocatorSetting setting = pool_allocator_setting();
  // The rendezvous can take as long as the group's timeout: let other Python threads run.
  py::gil_scoped_release release;
  auto group = c10::make_intrusive<ProcessGroupPlexus>(store, rank, size, timeout);
  // From the first plexus group on, large CPU allocations come from the pool (no staging
  // for the gradients, buckets and tensors made after it), unless turned off.
  if (setting != PoolAllocatorSetting::kOff) {
    plexus::torch_backend::use_pool_allocator_unless_on(plexus::torch_backend::kPoolMinBytes);
  }
  return group;
}

// The plexus backend of `group`: the group itself (torch 1.13's process groups are backends),
// or its CPU backend (torch 2.x's ProcessGroup holds one per device type).
ProcessGroupPlexus& plexus_of(const py::object& group) {
  if (py::isinstance<ProcessGroupPlexus>(group)) return group.cast<ProcessGroupPlexus&>();
  if (py::hasattr(group, "_get_backend")) {
    py::object cpu = py::module_::import("torch").attr("device")("cpu");
    py::object backend = group.attr("_get_backend")(cpu);
    if (py::isinstance<ProcessGroupPlexus>(backend)) return backend.cast<ProcessGroupPlexus&>();
  }
  throw std::invalid_argument("plexus_torch: the group is not a plexus process group");
}

// A new group as torch takes it: torch 1.13's process groups are backends, so the backend
// itself; torch 2.x's DDP and collectives take a ProcessGroup, which holds the backend for
// the CPU (as torch's own shrink_group builds one).
py::object as_group(const c10::intrusive_ptr<ProcessGroupPlexus>& backend) {
#if TORCH_VERSION_MAJOR >= 2
  py::module_ c10d = py::module_::import("torch._C._distributed_c10d");
  py::object group_type = c10d.attr("ProcessGroup");
  py::object custom = group_type.attr("BackendType").attr("CUSTOM");
  py::object group = group_type(c10d.attr("HashStore")(), backend->getRank(), backend->getSize());
  group.attr("_register_backend")(py::module_::import("torch").attr("device")("cpu"), custom,
                                  py::cast(backend));
  group.attr("_set_default_backend")(custom);
  return group;
#else
  return py::cast(backend);
#endif
}

// A group made by `make` with the GIL let go (the daemons agree meanwhile), as torch takes it.
template <class F>
py::object new_group(F&& make) {
  c10::intrusive_ptr<ProcessGroupPlexus> made;
  {
    py::gil_scoped_release release;
    made = std::forward<F>(make)();
  }
  return as_group(made);
}

// torch.distributed.shrink_group (2.14 here) hands the shrunk backend to a new ProcessGroup
// labelled GLOO whatever the backend is; DDP then takes the plexus backend for gloo's (its
// logger casts it to ProcessGroupGloo) and crashes. Torch's step that builds that group is
// wrapped so that a plexus backend's group is labelled CUSTOM, as init_process_group labels
// it; other backends' groups pass through unchanged.
void label_shrunk_groups_custom() {
#if PLEXUS_TORCH_SHRINK
  py::module_ c10d = py::module_::import("torch.distributed.distributed_c10d");
  if (!py::hasattr(c10d, "_create_shrunk_process_group")) return;
  py::object original = c10d.attr("_create_shrunk_process_group");
  c10d.attr("_create_shrunk_process_group") =
      py::cpp_function([original](const py::args& args, const py::kwargs& kwargs) {
        // (new_backend, remaining_ranks, metadata, is_default_group), as torch 2.14 calls it.
        py::object backend;
        if (kwargs.contains("new_backend")) {
          backend = kwargs["new_backend"];
        } else if (!args.empty()) {
          backend = args[0];
        }
        py::object group = original(*args, **kwargs);
        if (!backend || !py::isinstance<ProcessGroupPlexus>(backend)) return group;
        // The device torch registered it for: the group's bound device, else the CPU.
        py::object device = py::getattr(group, "bound_device_id", py::none());
        if (device.is_none()) device = py::module_::import("torch").attr("device")("cpu");
        py::object custom = group.attr("BackendType").attr("CUSTOM");
        group.attr("_register_backend")(device, custom, backend);
        group.attr("_set_default_backend")(custom);
        return group;
      });
#endif
}

// plexus_torch.shrink_group on a group torch made, where torch has its own shrink_group:
// that one, so that torch's bookkeeping (group names, the default group) follows.
bool torch_shrinks(const py::object& group) {
#if PLEXUS_TORCH_SHRINK
  py::module_ c10d = py::module_::import("torch.distributed.distributed_c10d");
  return py::hasattr(c10d, "shrink_group") && !py::isinstance<ProcessGroupPlexus>(group) &&
         c10d.attr("_world").attr("pg_map").contains(group);
#else
  (void)group;
  return false;  // the backend has no shrink() for torch's shrink_group to call
#endif
}

}  // namespace

PYBIND11_MODULE(plexus_torch, m) {
  m.doc() = "torch.distributed backend 'plexus': collectives run by the node's plexusd";
  // The base class must be known to pybind11 before ours is declared.
  py::module_ dist = py::module_::import("torch.distributed");
  py::class_<ProcessGroupPlexus, BackendBase, c10::intrusive_ptr<ProcessGroupPlexus>>(
      m, "ProcessGroupPlexus")
      .def(py::init(&create), py::arg("store"), py::arg("rank"), py::arg("size"),
           py::arg("timeout"));
  m.def("empty_like", &plexus::torch_backend::pool_empty_like, py::arg("tensor"),
        "An uninitialised CPU tensor like `tensor` in the Plexus pool: collectives on it need "
        "no copy in or out.");
  m.def("use_pool_allocator", &plexus::torch_backend::use_pool_allocator,
        py::arg("min_bytes") = plexus::torch_backend::kPoolMinBytes,
        "CPU allocations of at least min_bytes come from the Plexus pool while it has room, "
        "so collectives on them need no copy. On by default from the first plexus process "
        "group (PLEXUS_TORCH_POOL_ALLOCATOR=0: never; =1: from import); calling it earlier "
        "also puts the model built before init_process_group in the pool, or sets min_bytes. "
        "A child forked later gets its own copy of what it inherited from the pool, though "
        "pages it has not written still show the parent's later writes.");
  m.def("from_pool_allocator", &plexus::torch_backend::from_pool_allocator, py::arg("tensor"),
        "Whether the tensor's storage was allocated by the pool allocator (in the Plexus pool; "
        "False for empty_like's tensors, which are in the pool too).");
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"),
        "What torch.distributed calls for backend 'plexus' (registered on import).");
  // After a lost rank or node. Each call that forms a group waits for the others (up to
  // PLEXUS_INIT_TIMEOUT_MS): the GIL is let go meanwhile.
  m.def(
      "revoke",
      [](const py::object& group, const std::string& reason) {
        ProcessGroupPlexus& pg = plexus_of(group);
        py::gil_scoped_release release;
        pg.revoke(reason);
      },
      py::arg("group"), py::arg("reason") = "",
      "Revokes the group: every rank's pending and later work on it fails, naming this rank "
      "and the reason (no rank has to call it but this one).");
  m.def(
      "shrink_group",
      [](const py::object& group, const std::vector<int64_t>& exclude_ranks, bool abort) {
        ProcessGroupPlexus& pg = plexus_of(group);
        if (torch_shrinks(group)) {
          return py::module_::import("torch.distributed")
              .attr("shrink_group")(exclude_ranks, py::arg("group") = group,
                                    py::arg("shrink_flags") = abort ? 1 : 0);
        }
        return new_group([&] { return pg.shrink_group(exclude_ranks, abort); });
      },
      py::arg("group"), py::arg("exclude_ranks"), py::arg("abort") = false,
      "A new group of the ranks not in exclude_ranks (group ranks), renumbered densely in "
      "their order, with no Store and no new rendezvous: every rank not excluded calls it with "
      "the same list. abort=True ends the group's work in flight first (NCCL_SHRINK_ABORT). "
      "Pass the result to DistributedDataParallel(process_group=...). Where torch has its own "
      "torch.distributed.shrink_group (2.11 on), a group torch made is shrunk by it: the "
      "old group is destroyed, and a shrunk default group becomes the default.");
  m.def(
      "grow_group",
      [](const py::object& group, int size) {
        ProcessGroupPlexus& pg = plexus_of(group);
        return new_group([&] { return pg.grow(size); });
      },
      py::arg("group"), py::arg("size"),
      "The group grown to `size` ranks; its members keep their ranks and the new ones join with "
      "join_grown_group(grow_id(group), rank, size).");
  m.def(
      "grow_id", [](const py::object& group) { return py::bytes(plexus_of(group).grow_id()); },
      py::arg("group"), "The id the new ranks of the group's next growth join with (bytes).");
  m.def(
      "join_grown_group",
      [](const std::string& id, int rank, int size, std::chrono::milliseconds timeout) {
        return new_group([&] { return ProcessGroupPlexus::join_growth(id, rank, size, timeout); });
      },
      py::arg("grow_id"), py::arg("rank"), py::arg("size"),
      py::arg("timeout") = std::chrono::milliseconds(60000),
      "A new rank joins a growth with the id a member made (grow_id).");
  m.def(
      "suspend",
      [](const py::object& group) {
        ProcessGroupPlexus& pg = plexus_of(group);
        py::gil_scoped_release release;
        return pg.suspend_comm();
      },
      py::arg("group"),
      "Parks the group between an RL job's phases (ncclCommSuspend): its work must be done; "
      "work on it is refused until resume(group). Once every rank of the group on this node "
      "suspended it, plexusd lets the memory it keeps for it go. Returns the bytes this call "
      "released (0 until the node's last rank suspends).");
  m.def(
      "resume",
      [](const py::object& group) {
        ProcessGroupPlexus& pg = plexus_of(group);
        py::gil_scoped_release release;
        pg.resume_comm();
      },
      py::arg("group"), "Takes a suspended group up again (ncclCommResume).");
  label_shrunk_groups_custom();
  plexus::torch_backend::register_weights(m);
  // PLEXUS_TORCH_POOL_ALLOCATOR=1 turns the pool allocator on at import, so that even the
  // model built before init_process_group lives in the pool.
  if (pool_allocator_setting() == PoolAllocatorSetting::kFromImport) {
    plexus::torch_backend::use_pool_allocator(plexus::torch_backend::kPoolMinBytes);
  }
#if TORCH_VERSION_MAJOR >= 2
  // CPU tensors only so far: backend="plexus" then makes a CPU-only group, and
  // "cpu:plexus,cuda:nccl" puts CUDA tensors on NCCL. (A list, as torch documents: it keeps
  // it as the backend's device capability.)
  py::list devices;
  devices.append("cpu");
  dist.attr("Backend").attr("register_backend")("plexus", m.attr("create_process_group"),
                                                py::arg("devices") = devices);
#else
  dist.attr("Backend").attr("register_backend")("plexus", m.attr("create_process_group"));
#endif
}
