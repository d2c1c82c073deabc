#include "backends/mpi/mpi_widen.h"

#include "common/reduce.h"

namespace hcoll::backends::mpi {
namespace {

class NarrowingPending final : public Pending {
 public:
  NarrowingPending(PendingPtr inner, std::unique_ptr<WideBuffer> wide, size_t offset, size_t count,
                   DataType dtype, void* dst, std::shared_ptr<ScratchPool> pool)
      : pool_(std::move(pool)),
        wide_(std::move(wide)),
        inner_(std::move(inner)),
        offset_(offset),
        count_(count),
        dtype_(dtype),
        dst_(dst) {}
  ~NarrowingPending() override {
    // Abandoned (peers lost): MPI may still write into the buffer, as into any abandoned
    // operation's buffers, so it is left allocated.
    if (!done_ && wide_) wide_->leak();
  }
  bool poll(Status* status) override {
    if (!inner_->poll(status)) return false;
    done_ = true;
    if (status->isOk()) wide_->narrow(offset_, count_, dtype_, dst_);
    pool_->give(wide_->release());
    wide_.reset();
    return true;
  }

 private:
  std::shared_ptr<ScratchPool> pool_;
  std::unique_ptr<WideBuffer> wide_;  // declared before inner_: outlives it
  PendingPtr inner_;
  size_t offset_, count_;
  DataType dtype_;
  void* dst_;
  bool done_ = false;
};

}  // namespace

void WideBuffer::widen(const void* src, size_t offset, size_t count, DataType dtype) {
  widenToFloat32(dtype, src, data() + offset, count);
}

void WideBuffer::narrow(size_t offset, size_t count, DataType dtype, void* dst) {
  narrowFromFloat32(dtype, data() + offset, dst, count);
}

PendingPtr narrowWhenDone(PendingPtr inner, std::unique_ptr<WideBuffer> wide, size_t offset,
                          size_t count, DataType dtype, void* dst,
                          std::shared_ptr<ScratchPool> pool) {
  return std::make_unique<NarrowingPending>(std::move(inner), std::move(wide), offset, count, dtype,
                                            dst, std::move(pool));
}

}  // namespace hcoll::backends::mpi
