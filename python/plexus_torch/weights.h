// plexus_torch.weights: the node's weight store from Python (publish, pull, latest), with no
// process group: tensors go by name (a state_dict's keys, or a list's indices).
#pragma once

#include <pybind11/pybind11.h>

namespace plexus::torch_backend {

// Adds the submodule `weights` to `m` (importable as plexus_torch.weights too).
void register_weights(pybind11::module_& m);

}  // namespace plexus::torch_backend
