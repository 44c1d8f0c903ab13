// Blocking calls that Python may or may not be behind: torch calls some backend methods from
// Python (holding the GIL) and some from its own C++ threads.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <utility>

namespace plexus::torch_backend {

// f(), with the GIL let go meanwhile if this thread holds it, so that other Python threads
// (the progress thread dropping a tensor's last reference among them) can run.
template <class F>
decltype(auto) without_gil(F&& f) {
  if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) {
    pybind11::gil_scoped_release release;
    return std::forward<F>(f)();
  }
  return std::forward<F>(f)();
}

}  // namespace plexus::torch_backend
