// The Python extension hcoll.torch._c10d: the process group and the communicators behind it.
// hcoll/torch/distributed.py registers it with torch.distributed as backend "hcoll".

#include "communicator.h"
#include "process_group.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;
using hcoll::torch_c10d::Communicator;
using hcoll::torch_c10d::HcollLibrary;
using hcoll::torch_c10d::ProcessGroupHcoll;

namespace {

hcoll_reduce_op_t opFromName(const std::string& name) {
  if (name == "sum") return HCOLL_SUM;
  if (name == "average") return HCOLL_AVERAGE;
  if (name == "min") return HCOLL_MIN;
  if (name == "max") return HCOLL_MAX;
  if (name == "product") return HCOLL_PRODUCT;
  throw py::value_error("hcoll: op must be 'sum', 'average', 'min', 'max' or 'product', not '" +
                        name + "'");
}

}  // namespace

PYBIND11_MODULE(_c10d, m) {
  m.doc() = "hcoll's torch.distributed backend (see hcoll.torch.distributed)";
  // ProcessGroup and Work are torch's pybind11 classes: registered before ours derive from them.
  py::module::import("torch.distributed");

  py::class_<HcollLibrary, std::shared_ptr<HcollLibrary>>(m, "Library")
      .def_static(
          "load",
          [](const std::string& path) {
            return std::const_pointer_cast<HcollLibrary>(HcollLibrary::load(path));
          },
          py::arg("path"), "dlopen()s libhcoll at `path` and resolves its C ABI")
      .def_property_readonly("path", &HcollLibrary::path);

  py::class_<Communicator, std::shared_ptr<Communicator>>(m, "Communicator")
      .def_static(
          "world",
          [](const std::shared_ptr<HcollLibrary>& lib, int rank, int size,
             std::chrono::milliseconds timeout) {
            return Communicator::world(lib, rank, size, timeout);
          },
          py::arg("library"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
          py::call_guard<py::gil_scoped_release>())
      .def("subset", &Communicator::subset, py::arg("ranks"), py::arg("timeout"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("is_member", &Communicator::isMember)
      .def_property_readonly("rank", &Communicator::rank)
      .def_property_readonly("size", &Communicator::size);

  py::class_<ProcessGroupHcoll, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupHcoll>>(
      m, "ProcessGroupHcoll")
      .def(py::init([](const std::shared_ptr<Communicator>& comm, int rank, int size) {
             return c10::make_intrusive<ProcessGroupHcoll>(comm, rank, size);
           }),
           py::arg("communicator"), py::arg("rank"), py::arg("size"))
      .def_property_readonly("_communicator", &ProcessGroupHcoll::communicator)
      .def(
          "stats",
          [](const ProcessGroupHcoll& pg) {
            // hcoll_comm_stats of the group's communicator (this rank's view): for tests and
            // tuning, e.g. that allreduce_coalesced is one backend call.
            const auto& comm = pg.communicator();
            hcoll_comm_stats_t s{};
            s.mask = HCOLL_COMM_STATS_FIELD_ALL;
            comm->library()->check(comm->library()->hcoll_comm_stats(comm->handle(), &s),
                                   "hcoll_comm_stats");
            py::dict d;
            d["cycles"] = s.cycles;
            d["slow_path_negotiations"] = s.slow_path_negotiations;
            d["cache_hits"] = s.cache_hits;
            d["backend_calls"] = s.backend_calls;
            d["fused_tensors"] = s.fused_tensors;
            d["bytes"] = s.bytes;
            d["queue_depth"] = s.queue_depth;
            d["caller_rounds"] = s.caller_rounds;
            d["folded"] = s.folded;
            return d;
          },
          "hcoll's counters of this group's communicator (hcoll_comm_stats), as a dict")
      .def(
          "grouped_allreduce",
          [](ProcessGroupHcoll& pg, std::vector<at::Tensor> tensors, const std::string& name,
             const std::string& op, double prescale, double postscale) {
            return pg.groupedAllreduce(tensors, name, opFromName(op), prescale, postscale);
          },
          py::arg("tensors"), py::arg("name") = "", py::arg("op") = "average",
          py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
          py::call_guard<py::gil_scoped_release>(),
          "One grouped allreduce of `tensors` in place, matched across ranks by `name` ('' = "
          "call order); returns a Work (get_future() for DDP comm hooks)");
}
