#pragma once

// Releases Python's GIL for a scope if the calling thread holds it. The completion thread takes
// the GIL when it drops the last reference to a tensor that has a Python object (and when a
// future's Python callbacks run), so a thread that blocks on it — joining it, or destroying the
// communicator it waits on — must not hold the GIL (a process group is destroyed from Python).

#include <Python.h>

namespace hcoll::torch_c10d {

class GilRelease {
 public:
  GilRelease() {
    if (Py_IsInitialized() && PyGILState_Check()) saved_ = PyEval_SaveThread();
  }
  ~GilRelease() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* saved_ = nullptr;
};

}  // namespace hcoll::torch_c10d
