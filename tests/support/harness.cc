#include "support/harness.h"

#include <cstdio>
#include <exception>
#include <thread>

namespace htest {
namespace {

// The world of each rank this process hosts, when it hosts more than one (else empty: the
// main thread is the one rank).
std::vector<hcoll_comm_t>& hostedWorlds() {
  static std::vector<hcoll_comm_t> worlds;
  return worlds;
}

constexpr size_t kMaxReported = 40;  // failures printed per test case (all are counted)

}  // namespace

void SectionTracker::beginRun() {
  stack_.assign(1, Frame{});
}

bool SectionTracker::enter(const std::string& name) {
  Frame& parent = stack_.back();
  const std::string path = parent.path + "/" + name;
  for (const std::string& d : done_) {
    if (d == path) return false;
  }
  if (parent.enteredChild) {  // one section per level per run: this one waits for a later run
    parent.incomplete = true;
    return false;
  }
  parent.enteredChild = true;
  stack_.push_back(Frame{path});
  return true;
}

void SectionTracker::leave() {
  const Frame frame = stack_.back();
  stack_.pop_back();
  if (frame.incomplete) {
    stack_.back().incomplete = true;  // its children still need runs, and so does it
  } else {
    done_.push_back(frame.path);
  }
}

bool SectionTracker::anotherRun() const {
  return !stack_.empty() && stack_[0].incomplete;
}

void runBody(void (*body)()) {
  const std::vector<hcoll_comm_t>& worlds = hostedWorlds();
  if (worlds.empty()) {
    body();  // one rank per process: Catch2 runs on this thread
    return;
  }
  std::vector<RankRecord> ranks(worlds.size());
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r].world = worlds[r];
  bool failed = false;
  for (int run = 0; !failed; ++run) {
    for (RankRecord& rank : ranks) rank.sections.beginRun();
    std::vector<std::thread> threads;
    for (RankRecord& rank : ranks) {
      threads.emplace_back([&rank, body] {
        tRank = &rank;
        try {
          body();
        } catch (const RequireFailed&) {
          // recorded already
        } catch (const std::exception& e) {
          rank.failures.push_back(std::string("unexpected exception: ") + e.what());
        } catch (...) {
          rank.failures.push_back("unexpected exception");
        }
        tRank = nullptr;
      });
    }
    for (std::thread& t : threads) t.join();
    for (const RankRecord& rank : ranks) failed = failed || !rank.failures.empty();
    // Every rank takes the same sections (the bodies are alike): rank 0's tracker decides.
    if (!ranks[0].sections.anotherRun()) break;
    if (run >= 10000) {
      ranks[0].failures.push_back("the sections of this test case never all ran");
      failed = true;
    }
  }
  size_t reported = 0, total = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    for (const std::string& f : ranks[r].failures) {
      if (++total <= kMaxReported) {
        ++reported;
        FAIL_CHECK("rank " << r << ": " << f);
      }
    }
  }
  if (total > reported) FAIL_CHECK((total - reported) << " more failures not shown");
}

bool initializeRanks() {
  if (hcoll_initialize(nullptr) != HCOLL_SUCCESS) {
    std::fprintf(stderr, "hcoll_initialize failed: %s\n", hcoll_last_error());
    return false;
  }
  // A backend hosting every rank here (loopback) gives each rank's world; with one rank per
  // process (mpi) only this process's own rank is hosted.
  hcoll_comm_t world = nullptr;
  int size = 0;
  if (hcoll_comm_world(&world) == HCOLL_SUCCESS && hcoll_comm_size(world, &size) == HCOLL_SUCCESS) {
    std::vector<hcoll_comm_t> worlds;
    for (int r = 0; r < size; ++r) {
      hcoll_comm_t w = nullptr;
      if (hcoll_comm_world_of(r, &w) == HCOLL_SUCCESS) worlds.push_back(w);
    }
    if (worlds.size() > 1) hostedWorlds() = std::move(worlds);
  }
  return true;
}

void shutdownRanks() {
  hostedWorlds().clear();
  if (hcoll_is_initialized()) hcoll_shutdown();
}

}  // namespace htest
