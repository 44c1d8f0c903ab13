// `import plexus_torch` registers torch.distributed's backend "plexus":
// dist.init_process_group("plexus", ...) and dist.new_group(..., backend="plexus") then make
// a ProcessGroupPlexus.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "python/plexus_torch/process_group_plexus.h"

namespace py = pybind11;
using plexus::torch_backend::BackendBase;
using plexus::torch_backend::ProcessGroupPlexus;

namespace {

c10::intrusive_ptr<ProcessGroupPlexus> create(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int size,
                                              std::chrono::milliseconds timeout) {
  // The rendezvous can take as long as the group's timeout: let other Python threads run.
  py::gil_scoped_release release;
  return c10::make_intrusive<ProcessGroupPlexus>(store, rank, size, timeout);
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
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"),
        "What torch.distributed calls for backend 'plexus' (registered on import).");
#if TORCH_VERSION_MAJOR >= 2
  // CPU tensors only so far: "cpu:plexus,cuda:nccl" stays possible.
  dist.attr("Backend").attr("register_backend")("plexus", m.attr("create_process_group"),
                                                py::arg("devices") = py::make_tuple("cpu"));
#else
  dist.attr("Backend").attr("register_backend")("plexus", m.attr("create_process_group"));
#endif
}
