#pragma once

// One hcoll communicator owned by a c10d process group (its own negotiation thread), created
// collectively and destroyed with the group.

#include "hcoll_library.h"

#include <chrono>
#include <memory>
#include <vector>

namespace hcoll::torch_c10d {

class Communicator {
 public:
  // The default group's communicator: hcoll's MPI world reordered by torch rank (a split keyed by
  // `rank`). Collective over hcoll's world. Throws on every rank, with a message saying so, when
  // hcoll's world does not have `size` processes (the job was not started by mpiexec with as many
  // processes as init_process_group's world_size) or when the torch ranks are not 0..size-1, one
  // per process.
  static std::shared_ptr<Communicator> world(std::shared_ptr<const HcollLibrary> lib, int rank,
                                             int size, std::chrono::milliseconds timeout);
  // A new_group's communicator: `ranks` (sorted torch ranks of the parent) out of `parent`.
  // Collective over every member of `parent`, members of the new group or not: non-members get
  // a Communicator with no handle (isMember() false).
  static std::shared_ptr<Communicator> subset(const Communicator& parent,
                                              const std::vector<int>& ranks,
                                              std::chrono::milliseconds timeout);
  ~Communicator();  // hcoll_comm_destroy: collective, bounded (see hcoll.h)
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  bool isMember() const { return handle_ != nullptr; }
  hcoll_comm_t handle() const { return handle_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::shared_ptr<const HcollLibrary>& library() const { return lib_; }

 private:
  Communicator(std::shared_ptr<const HcollLibrary> lib, hcoll_comm_t handle);
  void setTimeout(std::chrono::milliseconds timeout);

  std::shared_ptr<const HcollLibrary> lib_;
  hcoll_comm_t handle_ = nullptr;
  int rank_ = -1;
  int size_ = 0;
};

}  // namespace hcoll::torch_c10d
