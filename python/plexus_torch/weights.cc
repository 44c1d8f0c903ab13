#include "python/plexus_torch/weights.h"

#include <ATen/ATen.h>
#include <pybind11/stl.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "plexus/plexus.h"

namespace py = pybind11;

namespace plexus::torch_backend {
namespace {

// A state_dict-like mapping's items or a list's, as names and CPU or CUDA tensors (contiguous:
// their bytes are what is stored and copied back).
struct NamedTensors {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;

  // The daemon copies CUDA tensors on its own stream: what torch queued on theirs (the step
  // that wrote them, or a forward pass still reading them) ends first.
  void wait_for_cuda_streams() const {
    std::vector<int> devices;
    for (const at::Tensor& t : tensors) {
      if (t.device().is_cuda() &&
          std::find(devices.begin(), devices.end(), t.device().index()) == devices.end()) {
        devices.push_back(t.device().index());
      }
    }
    if (devices.empty()) return;
    py::object cuda = py::module_::import("torch.cuda");
    for (int d : devices) cuda.attr("current_stream")(d).attr("synchronize")();
  }

  std::vector<plexus_weight_tensor_t> c_tensors() const {
    std::vector<plexus_weight_tensor_t> out;
    for (size_t i = 0; i < names.size(); ++i) {
      out.push_back({names[i].c_str(), tensors[i].data_ptr(), tensors[i].nbytes()});
    }
    return out;
  }
};

NamedTensors named(const py::handle& tensors, const char* call, const char* argument) {
  NamedTensors out;
  auto add = [&](std::string name, const py::handle& value) {
    if (!THPVariable_Check(value.ptr())) {
      throw std::invalid_argument(std::string(call) + ": " + argument + "['" + name +
                                  "'] is not a tensor");
    }
    at::Tensor t = value.cast<at::Tensor>();
    if ((!t.device().is_cpu() && !t.device().is_cuda()) || !t.is_contiguous()) {
      throw std::invalid_argument(std::string(call) + ": " + argument + "['" + name +
                                  "'] must be a contiguous CPU or CUDA tensor (use .contiguous())");
    }
    out.names.push_back(std::move(name));
    out.tensors.push_back(std::move(t));
  };
  if (py::hasattr(tensors, "items")) {
    for (auto item : tensors.attr("items")()) {
      auto pair = item.cast<py::tuple>();
      add(py::str(pair[0]).cast<std::string>(), pair[1]);
    }
  } else if (py::isinstance<py::list>(tensors) || py::isinstance<py::tuple>(tensors)) {
    size_t i = 0;
    for (auto value : tensors) add(std::to_string(i++), value);
  } else {
    throw std::invalid_argument(std::string(call) + ": " + argument +
                                " must be a dict of name to tensor (a state_dict) or a list");
  }
  return out;
}

// The library's failure as the Python exception a caller would catch for it.
[[noreturn]] void raise(plexus_result_t result) {
  const std::string why = plexus_get_last_error();
  switch (result) {
    case PLEXUS_ERR_TIMEOUT:
      PyErr_SetString(PyExc_TimeoutError, why.c_str());
      throw py::error_already_set();
    case PLEXUS_ERR_NO_MEMORY:
      PyErr_SetString(PyExc_MemoryError, why.c_str());
      throw py::error_already_set();
    case PLEXUS_ERR_INVALID_ARGUMENT:
      throw std::invalid_argument(why);
    default:
      throw std::runtime_error(why);
  }
}

void publish(const std::string& name, const py::object& tensors, uint64_t version) {
  const NamedTensors all = named(tensors, "weights.publish", "tensors");
  const std::vector<plexus_weight_tensor_t> c = all.c_tensors();
  all.wait_for_cuda_streams();
  plexus_result_t result;
  {
    py::gil_scoped_release release;
    result = plexus_weights_publish(name.c_str(), version, c.data(), c.size());
  }
  if (result != PLEXUS_SUCCESS) raise(result);
}

uint64_t pull(const std::string& name, const py::object& out, std::optional<uint64_t> version,
              uint64_t newer_than, std::optional<double> timeout) {
  const NamedTensors all = named(out, "weights.pull", "out");
  const std::vector<plexus_weight_tensor_t> c = all.c_tensors();
  if (timeout && (!std::isfinite(*timeout) || *timeout < 0)) {
    throw std::invalid_argument(
        "weights.pull: timeout must be a number of seconds >= 0, or None "
        "to wait without limit");
  }
  all.wait_for_cuda_streams();
  // Past what the daemon waits at most (49 days), the same as no limit.
  const int64_t timeout_ms =
      timeout && *timeout * 1000.0 < 4.0e9 ? static_cast<int64_t>(*timeout * 1000.0) : -1;
  uint64_t pulled = 0;
  plexus_result_t result;
  {
    py::gil_scoped_release release;
    result = plexus_weights_pull(name.c_str(), version.value_or(0), newer_than, timeout_ms,
                                 c.data(), c.size(), &pulled);
  }
  if (result != PLEXUS_SUCCESS) raise(result);
  return pulled;
}

std::optional<uint64_t> latest(const std::string& name) {
  uint64_t version = 0;
  if (plexus_result_t result = plexus_weights_latest(name.c_str(), &version);
      result != PLEXUS_SUCCESS) {
    raise(result);
  }
  if (version == 0) return std::nullopt;
  return version;
}

py::bytes key(const std::string& name) {
  plexus_unique_id_t id;
  if (plexus_result_t result = plexus_weights_key(name.c_str(), &id); result != PLEXUS_SUCCESS) {
    raise(result);
  }
  return py::bytes(reinterpret_cast<const char*>(&id), sizeof id);
}

void subscribe(const std::string& key, const std::string& name) {
  plexus_unique_id_t id;
  if (key.size() != sizeof id) {
    throw std::invalid_argument("weights.subscribe: a key is " + std::to_string(sizeof id) +
                                " bytes (what weights.key returned), not " +
                                std::to_string(key.size()));
  }
  std::memcpy(&id, key.data(), sizeof id);
  plexus_result_t result;
  {
    py::gil_scoped_release release;
    result = plexus_weights_subscribe(&id, name.c_str());
  }
  if (result != PLEXUS_SUCCESS) raise(result);
}

}  // namespace

void register_weights(py::module_& m) {
  py::module_ w = m.def_submodule(
      "weights",
      "The node's weight store (plexusd): named models, each a series of versions published "
      "once and pulled by any process on the node, never a mix of two versions. No process "
      "group is needed.");
  w.def("publish", &publish, py::arg("name"), py::arg("tensors"), py::arg("version"),
        "Hands version `version` (from 1, each newer than the last) of model `name` to this "
        "node's plexusd and returns once it holds a copy. `tensors`: a dict of name to "
        "contiguous CPU or CUDA tensor (a state_dict), or a list (named by index). Tensors in "
        "the Plexus pool (plexus_torch.empty_like, or the pool allocator) and CUDA tensors "
        "(by the daemon's copy engines) are copied once; other CPU tensors are staged "
        "through the pool. Raises ValueError for a version not newer than "
        "the newest, MemoryError past the store's cap (the message says what to change).");
  w.def("pull", &pull, py::arg("name"), py::arg("out"), py::arg("version") = py::none(),
        py::arg("newer_than") = 0, py::arg("timeout") = 60.0,
        "Copies a complete version of model `name` into `out` (same names, each tensor exactly "
        "its size; any subset of the version's tensors) and returns its number: `version`, or "
        "the newest one newer than `newer_than`. Waits up to `timeout` seconds for it (None: "
        "no limit), then raises TimeoutError.");
  w.def("latest", &latest, py::arg("name"),
        "The newest complete version of model `name` on this node, or None.");
  w.def("key", &key, py::arg("name"),
        "On the publisher's node: a key (bytes) naming model `name` to other nodes, to hand "
        "out of band as a unique id is.");
  w.def("subscribe", &subscribe, py::arg("key"), py::arg("name"),
        "On another node: this node's plexusd subscribes to the key's model as `name`; the "
        "publisher's daemon pushes it the newest version now and every version from then on "
        "(pull `name` here as any model).");
  py::module_::import("sys").attr("modules")["plexus_torch.weights"] = w;
}

}  // namespace plexus::torch_backend
