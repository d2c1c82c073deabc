#pragma once
// The point-to-point transport the MPI backend's schedules (mpi_p2p.h, mpi_adasum.cc) are written
// over, as Gloo writes its algorithms over transport::Pair: a schedule posts sends and receives
// of byte ranges to peers, polls until every posted transfer completed, and withdraws what it
// posted when it gives up. Two implementations carry the bytes (mpi_transport_impl.h): MPI
// messages on the data communicator, and the shared-memory lanes (mpi_shm.h); RoutedTransport
// picks one per transfer by its size alone, so both sides of every transfer pick alike. A
// schedule opens one transport per operation (TransportFactory::open), through the one
// ScheduleContext it is started with; the unit tests open in-memory transports instead and run
// the schedules with ranks as threads (tests/unit/test_p2p_transport.cc).
//
// Ordering contract, kept by every implementation: transfers from one rank to one peer are
// received in the order they were posted (MPI's non-overtaking order on (source, tag, comm); a
// lane is a FIFO byte stream), and both sides post the same transfers in the same order with the
// same byte counts (negotiated), so no transfer needs a header.

#include <cstddef>
#include <memory>
#include <utility>

#include "backends/backend.h"
#include "backends/mpi/mpi_algorithms.h"
#include "backends/mpi/mpi_local_reduce.h"
#include "common/scratch_pool.h"

namespace hcoll::backends::mpi {

// The transfers of one operation, one stage at a time.
class P2pTransport {
 public:
  virtual ~P2pTransport() = default;

  // Posts `bytes` bytes of `data` to `peer` / from `peer` into `data`; the buffer must stay
  // valid until poll reported the stage complete (or, abandoned, for good). An error leaves the
  // transfers posted before it in place (the caller abandons them).
  virtual Status postSend(int peer, const void* data, size_t bytes) = 0;
  virtual Status postRecv(int peer, void* data, size_t bytes) = 0;
  // A copy within this rank that belongs to the stage (a rank's own block): done alongside the
  // transfers where the transport moves bytes itself, so that the peers are not kept waiting.
  virtual void postLocalCopy(void* to, const void* from, size_t bytes) = 0;

  // Moves what it can without blocking; true once every transfer posted in this stage completed
  // (the stage is then over: the next post starts a new one) or failed (*status says which;
  // posted receives are then withdrawn). `status` is written only when it returns true.
  virtual bool poll(Status* status) = 0;
  // Nothing posted in this stage.
  virtual bool idle() const = 0;
  // The operation is given up on: withdraws the posted receives that a later operation's
  // transfer could otherwise match. What the peers may still write into is kept (a transfer in
  // flight at destruction is left to MPI, never freed under it).
  virtual void abandon() = 0;
};

// Opens one operation's transport (a communicator's MPI messages and lanes, or in-memory ones).
class TransportFactory {
 public:
  virtual ~TransportFactory() = default;
  // Room for `transfersPerStage` transfers posted in one stage without reallocating.
  virtual std::unique_ptr<P2pTransport> open(size_t transfersPerStage) const = 0;
};

// Everything a point-to-point schedule is started with besides its buffers and counts.
struct ScheduleContext {
  int rank = 0;
  int size = 1;
  const TransportFactory* transports = nullptr;  // outlives the call that starts the schedule
  std::shared_ptr<ScratchPool> pool;             // receive slots of reductions, Adasum's halves
  Reduction reduction;                           // reduce-scatter and allreduce only
};

// Routes each transfer by its byte count, alike on both sides: up to kLanesFrom through `Small`
// (MPI messages: one eager message is cheaper than the lanes' two copies), above it through
// `Large` (the lanes) when the communicator has them. A template so that one allocation per
// operation holds both and the routing is the same code in production and in the unit tests.
template <typename Small, typename Large>
class RoutedTransport final : public P2pTransport {
 public:
  RoutedTransport(Small small, Large large) : small_(std::move(small)), large_(std::move(large)) {}

  Status postSend(int peer, const void* data, size_t bytes) override {
    return toLarge(bytes) ? large_.postSend(peer, data, bytes) : small_.postSend(peer, data, bytes);
  }
  Status postRecv(int peer, void* data, size_t bytes) override {
    return toLarge(bytes) ? large_.postRecv(peer, data, bytes) : small_.postRecv(peer, data, bytes);
  }
  void postLocalCopy(void* to, const void* from, size_t bytes) override {
    if (large_.available()) {
      large_.postLocalCopy(to, from, bytes);
    } else {
      small_.postLocalCopy(to, from, bytes);
    }
  }
  bool poll(Status* status) override {
    Status largeStatus;
    const bool largeDone = large_.idle() || large_.poll(&largeStatus);
    if (largeDone && !largeStatus.isOk()) {
      small_.abandon();
      *status = largeStatus;
      return true;
    }
    Status smallStatus;
    const bool smallDone = small_.idle() || small_.poll(&smallStatus);
    if (smallDone && !smallStatus.isOk()) {
      large_.abandon();
      *status = smallStatus;
      return true;
    }
    if (!largeDone || !smallDone) return false;
    *status = Status::ok();
    return true;
  }
  bool idle() const override { return small_.idle() && large_.idle(); }
  void abandon() override {
    small_.abandon();
    large_.abandon();
  }

 private:
  bool toLarge(size_t bytes) const { return bytes > kLanesFrom && large_.available(); }

  Small small_;
  Large large_;
};

}  // namespace hcoll::backends::mpi
