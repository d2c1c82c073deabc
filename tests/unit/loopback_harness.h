#pragma once
// Drives loopback channels from one thread per rank in unit tests. Catch2's assertions are not
// thread-safe, so rank threads record failures in a RankLog and the main thread checks them
// after joining (runRanks does).

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/loopback/loopback_backend.h"
#include "common/half.h"

namespace htest::loopback {

using hcoll::Code;
using hcoll::DataType;
using hcoll::ReduceOp;
using hcoll::Status;
using hcoll::backends::Channel;
using hcoll::backends::PeerSignals;
using hcoll::backends::PendingPtr;

struct RankLog {
  std::vector<std::string> failures;
  void check(bool ok, const std::string& what) {
    if (!ok) failures.push_back(what);
  }
};

using Channels = std::vector<std::unique_ptr<Channel>>;

// The world of a fresh loopback backend of n ranks, one channel per rank.
inline Channels makeWorld(int n) {
  std::unique_ptr<hcoll::backends::Backend> backend;
  REQUIRE(hcoll::backends::loopback::createLoopbackBackend(n, &backend).isOk());
  Channels out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) REQUIRE(backend->world(r, &out[static_cast<size_t>(r)]).isOk());
  return out;  // the channels outlive the backend: they share only their group
}

// Polls until finished (true, *status set) or `seconds` passed (false).
inline bool drive(hcoll::backends::Pending& p, Status* status, double seconds = 20.0) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!p.poll(status)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Drives every Pending round-robin (so a rank never waits on one while its peers wait on
// another); false if they did not all finish in time. statuses[i] is pending i's.
inline bool driveAll(std::vector<PendingPtr>& pendings, std::vector<Status>* statuses,
                     double seconds = 20.0) {
  statuses->assign(pendings.size(), Status::ok());
  std::vector<bool> done(pendings.size(), false);
  size_t left = pendings.size();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (left > 0) {
    for (size_t i = 0; i < pendings.size(); ++i) {
      if (!done[i] && pendings[i]->poll(&(*statuses)[i])) {
        done[i] = true;
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Drives one pending and records a failure unless it finishes with `want`.
inline void expectFinish(RankLog& log, PendingPtr p, const std::string& what,
                         Code want = Code::kSuccess) {
  Status s;
  if (!drive(*p, &s)) {
    log.failures.push_back(what + ": did not finish");
  } else if (s.code() != want) {
    log.failures.push_back(what + ": finished with " + std::to_string(static_cast<int>(s.code())) +
                           " (" + s.message() + ")");
  }
}

// Runs body(rank, channel, log) on one thread per channel, then fails the test case with every
// failure any rank recorded (an exception in a rank thread is one).
template <class Body>
void runRanks(Channels& channels, Body body) {
  const size_t n = channels.size();
  std::vector<RankLog> logs(n);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(static_cast<int>(r), *channels[r], logs[r]);
      } catch (const std::exception& e) {
        logs[r].failures.push_back(std::string("exception: ") + e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  size_t failures = 0;
  for (size_t r = 0; r < n; ++r) {
    for (const std::string& f : logs[r].failures) {
      if (++failures <= 20) UNSCOPED_INFO("rank " << r << ": " << f);
    }
  }
  CHECK(failures == 0);
}

// Typed access to test buffers: values are small integers (and halves), exact in every dtype.
inline void store(DataType t, void* base, size_t i, double v) {
  switch (t) {
    case DataType::kUint8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case DataType::kUint16:
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(v);
      break;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v);
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = hcoll::floatToHalf(static_cast<float>(v));
      break;
    case DataType::kBfloat16:
      static_cast<uint16_t*>(base)[i] = hcoll::floatToBfloat16(static_cast<float>(v));
      break;
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      break;
    case DataType::kBool:
      static_cast<uint8_t*>(base)[i] = v != 0;
      break;
  }
}

inline double load(DataType t, const void* base, size_t i) {
  switch (t) {
    case DataType::kUint8:
      return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DataType::kUint16:
      return static_cast<const uint16_t*>(base)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(base)[i];
    case DataType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kFloat16:
      return hcoll::halfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBfloat16:
      return hcoll::bfloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DataType::kBool:
      return static_cast<const uint8_t*>(base)[i];
  }
  return 0;
}

inline const std::vector<DataType>& allDtypes() {
  static const std::vector<DataType> kAll = {
      DataType::kUint8,   DataType::kInt8,    DataType::kUint16,  DataType::kInt16,
      DataType::kInt32,   DataType::kInt64,   DataType::kFloat16, DataType::kBfloat16,
      DataType::kFloat32, DataType::kFloat64, DataType::kBool};
  return kAll;
}

inline const std::vector<ReduceOp>& allOps() {
  static const std::vector<ReduceOp> kAll = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                             ReduceOp::kMax, ReduceOp::kProduct};
  return kAll;
}

inline bool isUnsigned(DataType t) {
  return t == DataType::kUint8 || t == DataType::kUint16 || t == DataType::kBool;
}

// Input element i on rank r (the multi-rank tests' choice: PRODUCT stays within int8 at 4
// ranks, the others include negatives for signed types; bool alternates).
inline double inputValue(DataType t, ReduceOp op, int r, size_t i) {
  if (t == DataType::kBool) return ((static_cast<size_t>(r) + i) % 3) == 0 ? 1 : 0;
  if (op == ReduceOp::kProduct) return static_cast<double>((static_cast<size_t>(r) + i) % 3 + 1);
  const auto v = static_cast<int64_t>((static_cast<size_t>(r) * 5 + i * 3) % 11);
  return isUnsigned(t) ? static_cast<double>(v) : static_cast<double>(v - 5);
}

// The backend's result for element i over n ranks, computed directly (AVERAGE is a SUM here;
// the runtime scales). bool: SUM/MAX are OR, MIN/PRODUCT AND.
inline double expectedValue(DataType t, ReduceOp op, int n, size_t i) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < n; ++r) {
    const double v = inputValue(t, op, r, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage:
        acc += v;
        break;
      case ReduceOp::kProduct:
        acc *= v;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = v > acc ? v : acc;
        break;
    }
  }
  if (t == DataType::kBool) return acc != 0 ? 1 : 0;
  return acc;
}

}  // namespace htest::loopback
