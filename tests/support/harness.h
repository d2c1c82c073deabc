#pragma once
// Collective tests written once for every backend. A test body is the code of ONE rank:
//   HTEST_CASE("allreduce: ...", "[allreduce]") { ... world() ... HREQUIRE(x == y); ... }
// Under MPI (one rank per process, mpiexec) the body runs on the main thread and the H* macros
// are Catch2's own (REQUIRE, CHECK, INFO, SECTION). Under a backend that hosts every rank in one
// process (HCOLL_BACKEND=loopback) the body runs on one thread per rank, each with its own
// world() (hcoll_comm_world_of); Catch2's assertions are not thread-safe, so there the macros
// record failures per rank (with the INFO context) and the main thread reports them after the
// threads joined. HSECTION then follows Catch2's rule (one leaf section per run of the body,
// runs repeated until every section ran) with all ranks taking the same path.

#include <catch2/catch.hpp>

#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "hcoll/hcoll.h"

namespace htest {

// Which sections a rank entered and finished, across the runs of one test case's body.
class SectionTracker {
 public:
  void beginRun();
  bool enter(const std::string& name);
  void leave();
  // Whether some section was skipped or left unfinished in the run that just ended.
  bool anotherRun() const;

 private:
  struct Frame {
    std::string path;
    bool enteredChild = false;
    bool incomplete = false;
  };
  std::vector<Frame> stack_;
  std::vector<std::string> done_;
};

// What one rank records while its body runs on a thread (null on threads that run no body,
// and under MPI: then the macros are Catch2's).
struct RankRecord {
  hcoll_comm_t world = nullptr;
  std::vector<std::string> failures;
  std::vector<std::string> context;  // the HINFO messages in scope
  SectionTracker sections;
};
inline thread_local RankRecord* tRank = nullptr;
inline bool ranksOnThreads() {
  return tRank != nullptr;
}

// Thrown by a failed HREQUIRE on a rank thread: ends that rank's body.
struct RequireFailed {};

inline void recordFailure(bool fatal, const char* file, int line, const std::string& what) {
  std::ostringstream os;
  os << file << ":" << line << ": " << what;
  for (const std::string& c : tRank->context) os << "\n    with: " << c;
  tRank->failures.push_back(os.str());
  if (fatal) throw RequireFailed{};
}

// Evaluates a Catch2-decomposed expression on a rank thread. Catch2's decomposer holds no shared
// state, but its value printing does (StringMaker's numbers go through one process-wide pool of
// string streams), so failures are printed one at a time: two ranks failing together crashed
// the test instead of reporting.
inline void checkExpression(bool fatal, const char* file, int line, const char* text,
                            const Catch::ITransientExpression& e) {
  if (e.getResult()) return;
  static std::mutex printing;
  std::ostringstream os;
  os << text << " with expansion: ";
  {
    std::lock_guard<std::mutex> lock(printing);
    e.streamReconstructedExpression(os);
  }
  recordFailure(fatal, file, line, os.str());
}
template <class T>
void checkExpression(bool fatal, const char* file, int line, const char* text,
                     const Catch::ExprLhs<T>& e) {
  checkExpression(fatal, file, line, text, e.makeUnaryExpr());
}

// HINFO's message: Catch2's INFO under MPI, the rank's context on a rank thread.
class ScopedInfo {
 public:
  ScopedInfo(const char* file, int line, const std::string& text) {
    if (ranksOnThreads()) {
      tRank->context.push_back(text);
      pushed_ = true;
    } else {
      catch_.emplace(
          Catch::MessageBuilder("INFO", Catch::SourceLineInfo(file, line), Catch::ResultWas::Info)
          << text);
    }
  }
  ~ScopedInfo() {
    if (pushed_) tRank->context.pop_back();
  }
  ScopedInfo(const ScopedInfo&) = delete;
  ScopedInfo& operator=(const ScopedInfo&) = delete;

 private:
  bool pushed_ = false;
  std::optional<Catch::ScopedMessage> catch_;
};

// HSECTION: Catch2's SECTION under MPI, the rank's tracker on a rank thread.
class Section {
 public:
  Section(const char* file, int line, const std::string& name) {
    if (ranksOnThreads()) {
      entered_ = tRank->sections.enter(name);
      tracked_ = entered_;
    } else {
      catch_.emplace(Catch::SectionInfo(Catch::SourceLineInfo(file, line), name));
      entered_ = static_cast<bool>(*catch_);
    }
  }
  ~Section() {
    if (tracked_) tRank->sections.leave();
  }
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;
  explicit operator bool() const { return entered_; }

 private:
  bool entered_ = false;
  bool tracked_ = false;
  std::optional<Catch::Section> catch_;
};

// Builds a message from `<<` pieces, like INFO's argument.
class Text {
 public:
  template <class T>
  Text& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

// Runs one test case's body: directly under MPI; under a backend hosting every rank here, on
// one thread per rank (each with tRank set), again while sections remain, then reports every
// rank's failures through Catch2 on this (the main) thread.
void runBody(void (*body)());

// Around Catch2's session in the tests' main: initializes hcoll (false, with a message, when
// that fails) and, under a backend that hosts several ranks, fetches each rank's world
// (hcoll_comm_world_of); then shuts hcoll down.
bool initializeRanks();
void shutdownRanks();

}  // namespace htest

#define HTEST_CAT2_(a, b) a##b
#define HTEST_CAT_(a, b) HTEST_CAT2_(a, b)

// A Catch2 test case whose body is one rank's code (see above).
#define HTEST_CASE(...)                                  \
  static void HTEST_CAT_(htestBody_, __LINE__)();        \
  TEST_CASE(__VA_ARGS__) {                               \
    ::htest::runBody(&HTEST_CAT_(htestBody_, __LINE__)); \
  }                                                      \
  static void HTEST_CAT_(htestBody_, __LINE__)()

#define HTEST_ASSERT_(fatal, macro, catchMacro, ...)                                  \
  do {                                                                                \
    if (::htest::ranksOnThreads()) {                                                  \
      ::htest::checkExpression(fatal, __FILE__, __LINE__, macro "(" #__VA_ARGS__ ")", \
                               ::Catch::Decomposer() <= __VA_ARGS__);                 \
    } else {                                                                          \
      catchMacro(__VA_ARGS__);                                                        \
    }                                                                                 \
  } while (false)

#define HREQUIRE(...) HTEST_ASSERT_(true, "REQUIRE", REQUIRE, __VA_ARGS__)
#define HCHECK(...) HTEST_ASSERT_(false, "CHECK", CHECK, __VA_ARGS__)
#define HINFO(msg)                                                         \
  ::htest::ScopedInfo HTEST_CAT_(htestInfo_, __LINE__)(__FILE__, __LINE__, \
                                                       (::htest::Text() << msg).str())
#define HSECTION(name)                                               \
  if (const ::htest::Section & HTEST_CAT_(htestSection_, __LINE__) = \
          ::htest::Section(__FILE__, __LINE__, name))
