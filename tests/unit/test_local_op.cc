// PendingOps and LocalOp recycling (runtime/local_op.h): the nodes and vectors a finished
// operation leaves are reused without changing what the next operation sees.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "runtime/local_op.h"
#include "runtime/request.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

std::unique_ptr<LocalOp> named(const std::string& name) {
  auto op = std::make_unique<LocalOp>();
  op->spec.name = name;
  return op;
}

std::vector<std::string> order(PendingOps& pending) {
  std::vector<std::string> names;
  for (const auto& op : pending.all()) names.push_back(op->spec.name);
  return names;
}

}  // namespace

TEST_CASE("pending operations reuse taken nodes and keep order and lookup", "[local_op]") {
  PendingOps pending;
  // Far more operations than the nodes kept, taken in an order unlike the one they came in, so
  // that reused list and map nodes end up everywhere.
  for (int round = 0; round < 3; ++round) {
    std::vector<std::string> want;
    for (int i = 0; i < 100; ++i) {
      const std::string name = "op." + std::to_string(round) + "." + std::to_string(i);
      pending.add(named(name));
      want.push_back(name);
    }
    REQUIRE(order(pending) == want);
    REQUIRE(pending.size() == want.size());
    for (const std::string& name : want) {
      const LocalOp* op = pending.find(name);
      REQUIRE(op != nullptr);
      REQUIRE(op->spec.name == name);
    }
    REQUIRE(pending.find("op.absent") == nullptr);
    REQUIRE(pending.take("op.absent") == nullptr);
    // Odd ones first, then the rest from the back.
    for (size_t i = 1; i < want.size(); i += 2) {
      auto op = pending.take(want[i]);
      REQUIRE(op != nullptr);
      REQUIRE(op->spec.name == want[i]);
      REQUIRE(pending.find(want[i]) == nullptr);
    }
    std::vector<std::string> evens;
    for (size_t i = 0; i < want.size(); i += 2) evens.push_back(want[i]);
    REQUIRE(order(pending) == evens);
    for (auto it = evens.rbegin(); it != evens.rend(); ++it) {
      auto op = pending.take(*it);
      REQUIRE(op != nullptr);
      REQUIRE(op->spec.name == *it);
    }
    REQUIRE(pending.empty());
    REQUIRE(pending.all().empty());
  }
  // A name taken earlier comes back through a reused map node: found, and only once.
  pending.add(named("again"));
  pending.add(named("op.0.5"));
  REQUIRE(order(pending) == std::vector<std::string>{"again", "op.0.5"});
  REQUIRE(pending.take("op.0.5")->spec.name == "op.0.5");
  REQUIRE(pending.find("op.0.5") == nullptr);
  REQUIRE(pending.find("again") != nullptr);
}

TEST_CASE("a recycled operation comes back as a new one with its storage kept", "[local_op]") {
  auto op = makeLocalOp();
  // Every field away from its default (clearKeepingStorage must reset each).
  op->spec.name = "a name longer than the small-string buffer";
  op->spec.kind = OpKind::kBroadcast;
  op->spec.op = ReduceOp::kMax;
  op->spec.prescale = 2.0;
  op->spec.postscale = 0.5;
  op->spec.root = 3;
  op->spec.device = 1;
  op->spec.members.push_back(MemberSpec{DataType::kFloat64, {4, 2}});
  op->spec.splits = {1, 2};
  op->spec.ranks = {0, 1};
  op->spec.color = 5;
  op->spec.key = 6;
  op->spec.outputRows = {4};
  op->spec.autoNamed = true;
  op->spec.ageMicros = 7;
  op->submittedAt = std::chrono::steady_clock::now();
  op->firstSeen = op->submittedAt;
  op->autoReplayRefused = true;
  TensorDesc t;
  t.shape = {4, 2};
  op->inputs.push_back(t);
  op->outputs.push_back(t);
  op->request = std::make_shared<Request>(nullptr);
  op->announced = true;
  op->callerDrivable = true;
  op->payloadBytes = 64;
  op->flightSeq = 9;
  int folded = 0;
  op->foldedResult = &folded;
  const LocalOp* const address = op.get();
  const size_t nameCapacity = op->spec.name.capacity();

  recycleLocalOp(std::move(op));
  auto again = makeLocalOp();
  // This thread kept it: the same object, emptied, its vectors' storage still there.
  REQUIRE(again.get() == address);
  REQUIRE(again->spec == OpSpec{});
  REQUIRE(again->spec.name.empty());
  REQUIRE(again->spec.name.capacity() == nameCapacity);
  REQUIRE(again->spec.members.empty());
  REQUIRE(again->spec.members.capacity() >= 1);
  REQUIRE(again->inputs.empty());
  REQUIRE(again->inputs.capacity() >= 1);
  REQUIRE(again->outputs.empty());
  REQUIRE(again->outputs.capacity() >= 1);
  REQUIRE(again->markers.empty());
  REQUIRE(again->request == nullptr);
  REQUIRE(again->submittedAt == std::chrono::steady_clock::time_point{});
  REQUIRE(again->firstSeen == std::chrono::steady_clock::time_point{});
  REQUIRE_FALSE(again->announced);
  REQUIRE_FALSE(again->autoReplayRefused);
  REQUIRE_FALSE(again->callerDrivable);
  REQUIRE(again->payloadBytes == 0);
  REQUIRE(again->flightSeq == 0);
  REQUIRE(again->foldedResult == nullptr);
  // With none kept, a new one.
  auto fresh = makeLocalOp();
  REQUIRE(fresh.get() != again.get());
  REQUIRE(fresh->spec == OpSpec{});
}

TEST_CASE("pending operations are found by their own names after others were taken and freed",
          "[local_op]") {
  // The map's keys view each operation's own name (no copy): names on the heap, so that a key
  // left viewing a freed operation's name reads freed memory (the ASan build fails then); more
  // operations than are compared one by one, so that the map holds them.
  PendingOps pending;
  const std::string stem(48, 'n');
  const int count = static_cast<int>(PendingOps::kLinearUpTo) + 2;
  for (int i = 0; i < count; ++i) pending.add(named(stem + std::to_string(i)));
  for (int i = 0; i < count; ++i) {
    const std::string name = stem + std::to_string(i);
    {
      auto op = pending.take(name);
      REQUIRE(op != nullptr);
    }  // freed here, its map node kept for the next add
    REQUIRE(pending.find(name) == nullptr);
    pending.add(named(name));
    REQUIRE(pending.find(name) != nullptr);
    REQUIRE(pending.find(name)->spec.name == name);
  }
  // The same name twice (a communicator never does this): the newest is found and taken.
  pending.add(named(stem + "dup"));
  pending.add(named(stem + "dup"));
  const LocalOp* newest = pending.all().back().get();
  REQUIRE(pending.find(stem + "dup") == newest);
  {
    auto op = pending.take(stem + "dup");
    REQUIRE(op.get() == newest);
  }
  REQUIRE(pending.size() == static_cast<size_t>(count) + 1);
  for (int i = 0; i < count; ++i) REQUIRE(pending.find(stem + std::to_string(i)) != nullptr);
}

TEST_CASE("pending operations are found alike below, across and above the linear threshold",
          "[local_op]") {
  // Up to kLinearUpTo operations are compared one by one, beyond that a map holds them until
  // the list empties: every size on the way up and down, twice (the second time through
  // reused nodes).
  PendingOps pending;
  const size_t most = PendingOps::kLinearUpTo + 3;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::string> names;
    for (size_t i = 0; i < most; ++i) {
      names.push_back("pass" + std::to_string(pass) + ".op" + std::to_string(i));
      pending.add(named(names.back()));
      for (const std::string& name : names) {
        REQUIRE(pending.find(name) != nullptr);
        REQUIRE(pending.find(name)->spec.name == name);
      }
      REQUIRE(pending.find("absent") == nullptr);
    }
    // Taken from the middle outwards: the map's entries of the others stay right.
    while (!names.empty()) {
      const size_t middle = names.size() / 2;
      auto op = pending.take(names[middle]);
      REQUIRE(op != nullptr);
      REQUIRE(op->spec.name == names[middle]);
      REQUIRE(pending.find(names[middle]) == nullptr);
      names.erase(names.begin() + static_cast<std::ptrdiff_t>(middle));
      REQUIRE(pending.size() == names.size());
      for (const std::string& name : names) REQUIRE(pending.find(name)->spec.name == name);
    }
    REQUIRE(pending.empty());
    REQUIRE(pending.take("absent") == nullptr);
  }
}

TEST_CASE("requests' blocks are kept per thread and reused", "[local_op]") {
  // makeRequest (runtime/request.h) allocates through RecycledAllocator: the block a request
  // freed on this thread is the next one's.
  auto first = makeRequest(nullptr);
  const void* block = first.get();
  first.reset();
  auto second = makeRequest(nullptr);
  REQUIRE(second.get() == block);
  REQUIRE(second->test() == Code::kInProgress);  // a new request, whatever the block held
  second->complete(Status::ok());
  REQUIRE(second->test() == Code::kSuccess);
  // Dropped on another thread: kept there, and freed when that thread ends (ASan: no leak, no
  // mismatched free).
  std::thread other([r = std::move(second)]() mutable { r.reset(); });
  other.join();
  // A thread that makes and drops many keeps only a few (the rest freed at once).
  bool madeAgain = false;  // (Catch2's assertions are not for other threads)
  std::thread many([&madeAgain] {
    std::vector<std::shared_ptr<Request>> requests;
    for (int i = 0; i < 100; ++i) requests.push_back(makeRequest(nullptr));
    requests.clear();
    auto again = makeRequest(nullptr);
    madeAgain = again != nullptr && again->test() == Code::kInProgress;
  });
  many.join();
  REQUIRE(madeAgain);
}

TEST_CASE("pending operations are taken by address too", "[local_op]") {
  PendingOps pending;
  pending.add(named("a"));
  pending.add(named("b"));
  LocalOp* b = pending.find("b");
  REQUIRE(b != nullptr);
  auto taken = pending.take(*b);  // a few pending: compared by address
  REQUIRE(taken.get() == b);
  REQUIRE(pending.find("b") == nullptr);
  REQUIRE(pending.take(*taken) == nullptr);  // no longer here
  REQUIRE(order(pending) == std::vector<std::string>{"a"});
  // Many pending (indexed by name): the same answer.
  for (int i = 0; i < 10; ++i) pending.add(named("op." + std::to_string(i)));
  LocalOp* seven = pending.find("op.7");
  REQUIRE(seven != nullptr);
  auto taken7 = pending.take(*seven);
  REQUIRE(taken7.get() == seven);
  REQUIRE(pending.find("op.7") == nullptr);
  REQUIRE(pending.size() == 10);
}

TEST_CASE("a recycled block serves any count up to the block's", "[local_op]") {
  // Request::Outputs keeps blocks of up to four outputs: a grouped call's three and a lone
  // call's one reuse the same blocks (common/recycled_allocator.h).
  using Ints = std::vector<int, RecycledAllocator<int, 4>>;
  const int* block = nullptr;
  {
    Ints three;
    three.reserve(3);
    three.assign({1, 2, 3});
    block = three.data();
  }
  Ints one;
  one.reserve(1);
  REQUIRE(one.data() == block);
  one.push_back(7);
  REQUIRE(one[0] == 7);
  Ints many(100, 5);  // beyond a block: plain operator new, freed as such
  REQUIRE(many.size() == 100);
  REQUIRE(many[99] == 5);
  many.clear();
  many.shrink_to_fit();
  REQUIRE(many.capacity() == 0);
}

TEST_CASE("a request's outputs and received splits are what was added, in order", "[local_op]") {
  Request r(nullptr);
  REQUIRE(r.receivedSplits() == nullptr);  // not an alltoall
  float caller[6] = {};
  r.addCallerOutput(DataType::kFloat32, Shape{2, 3}, kHostDevice, nullptr, caller);
  void* owned = nullptr;
  REQUIRE(r.addOutput(DataType::kInt64, Shape{4}, kHostDevice, nullptr, &owned).isOk());
  REQUIRE(owned != nullptr);
  static_cast<int64_t*>(owned)[3] = 9;  // runtime-owned memory of the output's size
  r.addCallerOutput(DataType::kInt8, Shape{}, kHostDevice, nullptr, caller);
  // Output 0 lives in the request, the others in its vector: both read alike.
  REQUIRE(r.outputCount() == 3);
  const OutputTensor* first = &r.output(0);
  REQUIRE(r.output(0).data == caller);
  REQUIRE(r.output(0).callerOwned);
  REQUIRE(r.output(0).shape == Shape{2, 3});
  REQUIRE(r.output(1).data == owned);
  REQUIRE_FALSE(r.output(1).callerOwned);
  REQUIRE(r.output(1).dtype == DataType::kInt64);
  REQUIRE(r.output(1).shape == Shape{4});
  REQUIRE(r.output(2).shape.empty());
  REQUIRE(&r.output(0) == first);  // adding outputs never moved the first
  r.setReceivedSplits(Request::Splits{3, 0, 5});
  REQUIRE(r.receivedSplits() != nullptr);
  REQUIRE(std::vector<int64_t>(r.receivedSplits()->begin(), r.receivedSplits()->end()) ==
          std::vector<int64_t>{3, 0, 5});
}

TEST_CASE("an output the allocator refuses leaves no entry behind", "[local_op]") {
  auto refusing = std::make_shared<OutputAllocator>();
  refusing->alloc = [](int32_t, void*, size_t) -> void* { return nullptr; };
  refusing->free = [](int32_t, void*) {};
  Request r(refusing);
  void* data = reinterpret_cast<void*>(1);
  const Status s = r.addOutput(DataType::kFloat32, Shape{8}, kHostDevice, nullptr, &data);
  REQUIRE(s.code() == Code::kNoMemory);
  REQUIRE(r.outputCount() == 0);
  REQUIRE(data == reinterpret_cast<void*>(1));  // untouched
  // The same after a first output that was had: the refused second leaves the first alone.
  float caller[3] = {};
  Request mixed(refusing);
  mixed.addCallerOutput(DataType::kFloat32, Shape{2}, kHostDevice, nullptr, caller);
  REQUIRE(mixed.addOutput(DataType::kFloat32, Shape{8}, kHostDevice, nullptr, &data).code() ==
          Code::kNoMemory);
  REQUIRE(mixed.outputCount() == 1);
  REQUIRE(mixed.output(0).data == caller);
  // A refused first output leaves room for the next one, which starts afresh.
  REQUIRE_FALSE(r.addOutput(DataType::kFloat32, Shape{8}, kHostDevice, nullptr, &data).isOk());
  r.addCallerOutput(DataType::kInt8, Shape{3}, kHostDevice, nullptr, caller);
  REQUIRE(r.outputCount() == 1);
  REQUIRE(r.output(0).callerOwned);
  REQUIRE(r.output(0).shape == Shape{3});
}

TEST_CASE("a wait's timeout is never early", "[local_op]") {
  // A wait that times out returns only once its timeout has passed (a coarse clock, which lagged
  // the precise one by more than its 4 ms resolution on the test VM, would date it early).
  for (double timeout : {0.004, 0.05}) {
    Request r(nullptr);  // never completed
    const auto start = std::chrono::steady_clock::now();
    REQUIRE(r.wait(timeout) == Code::kTimeout);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    INFO("wait(" << timeout << ") returned after " << waited << " s");
    REQUIRE(waited >= timeout);
    REQUIRE(waited < timeout + 1.0);  // and not without bound
  }
}
