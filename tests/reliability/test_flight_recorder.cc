// Unit tests of the flight recorder ring: states, bounded size, overwritten entries ignored, and
// the file dump.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/config.h"
#include "runtime/flight_recorder.h"

using namespace hcoll;
using namespace hcoll::runtime;

namespace {

OpSpec op(const std::string& name, int64_t n) {
  OpSpec s;
  s.name = name;
  s.kind = OpKind::kAllgather;
  s.members.push_back(MemberSpec{DataType::kFloat64, {n, 2}});
  return s;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (auto& l : lines) s += l + "\n";
  return s;
}

}  // namespace

TEST_CASE("flight recorder records every state of an operation") {
  FlightRecorder rec(1, 4);
  uint64_t a = rec.submitted(op("grad.0", 3), std::chrono::steady_clock::now());
  uint64_t b = rec.submitted(op("grad.1", 0), std::chrono::steady_clock::now());
  REQUIRE(a != 0);
  REQUIRE(b == a + 1);
  rec.advance(a, FlightState::kNegotiated, std::chrono::steady_clock::now());
  rec.advance(a, FlightState::kRunning, std::chrono::steady_clock::now());
  rec.advance(a, FlightState::kDone, std::chrono::steady_clock::now(), Code::kSuccess);
  rec.advance(b, FlightState::kDone, std::chrono::steady_clock::now(), Code::kMismatch);
  std::string text = joined(rec.describe());
  INFO(text);
  REQUIRE(text.find("(rank 1 of 4)") != std::string::npos);
  REQUIRE(text.find("'grad.0' allgather float64 members=1 elements=6 bytes=48 state=done ok") !=
          std::string::npos);
  REQUIRE(
      text.find("'grad.1' allgather float64 members=1 elements=0 bytes=0 state=done MISMATCH") !=
      std::string::npos);
}

TEST_CASE("flight recorder never dates a state before the one it follows") {
  // Later states come from the coarse clock, up to a tick behind the precise submission time.
  FlightRecorder rec(0, 2);
  const auto submittedAt = std::chrono::steady_clock::now() - std::chrono::seconds(5);
  const uint64_t a = rec.submitted(op("early", 1), submittedAt);
  rec.advance(a, FlightState::kRunning, submittedAt - std::chrono::seconds(2));
  rec.advance(a, FlightState::kDone, submittedAt - std::chrono::seconds(1), Code::kSuccess);
  const std::string text = joined(rec.describe());
  INFO(text);
  // "t=<submitted>/<negotiated>/<running>/<done>" in seconds ago: all four the submission's.
  const size_t at = text.find("'early'");
  REQUIRE(at != std::string::npos);
  const size_t t = text.find("t=", at);
  REQUIRE(t != std::string::npos);
  double ago[4] = {};
  REQUIRE(std::sscanf(text.c_str() + t, "t=%lf/%lf/%lf/%lf", &ago[0], &ago[1], &ago[2],
                      &ago[3]) == 4);
  REQUIRE(ago[0] >= 5.0);
  for (double x : ago) REQUIRE(x == ago[0]);
}

TEST_CASE("flight recorder is bounded and ignores overwritten entries") {
  FlightRecorder rec(0, 2);
  uint64_t first = rec.submitted(op("first", 1), std::chrono::steady_clock::now());
  for (size_t i = 0; i < FlightRecorder::kCapacity + 10; ++i) {
    rec.submitted(op("op." + std::to_string(i), 1), std::chrono::steady_clock::now());
  }
  // Long overwritten: must not touch a newer entry.
  rec.advance(first, FlightState::kDone, std::chrono::steady_clock::now());
  auto lines = rec.describe();
  REQUIRE(lines.size() == FlightRecorder::kCapacity + 1);  // header + the ring
  std::string text = joined(lines);
  REQUIRE(text.find("'first'") == std::string::npos);
  REQUIRE(text.find("state=done") == std::string::npos);
  REQUIRE(text.find("'op." + std::to_string(FlightRecorder::kCapacity + 9) + "'") !=
          std::string::npos);
}

TEST_CASE("flight recorder truncates long names without overflowing") {
  FlightRecorder rec(0, 1);
  rec.submitted(op(std::string(1000, 'x'), 1), std::chrono::steady_clock::now());
  std::string text = joined(rec.describe());
  REQUIRE(text.find(std::string(FlightRecorder::kNameBytes - 1, 'x') + "'") != std::string::npos);
}

TEST_CASE("flight recorder writes tracked recorders to <path>.<rank>") {
  const std::string path = "flight-recorder-unit";
  FlightRecorder::configure(path, 7);
  auto rec = std::make_shared<FlightRecorder>(0, 2);
  FlightRecorder::track(rec);
  rec->submitted(op("in-file", 2), std::chrono::steady_clock::now());
  rec.reset();  // tracked recorders outlive their communicator
  REQUIRE(FlightRecorder::writeFile("unit test").isOk());
  std::ifstream in(path + ".7");
  std::stringstream ss;
  ss << in.rdbuf();
  REQUIRE(ss.str().find("world rank 7: unit test") != std::string::npos);
  REQUIRE(ss.str().find("'in-file' allgather") != std::string::npos);
  FlightRecorder::reset();
  REQUIRE(FlightRecorder::writeFile("after reset").isOk());  // no path: nothing written
  std::remove((path + ".7").c_str());
}

TEST_CASE("HCOLL_FLIGHT_RECORDER is validated at initialize") {
  Config c;
  ::setenv("HCOLL_FLIGHT_RECORDER", "/nonexistent-dir/fr", 1);
  Status bad = Config::fromEnvironment(&c);
  REQUIRE(bad.code() == Code::kInvalidArgument);
  REQUIRE(bad.message().find("HCOLL_FLIGHT_RECORDER") != std::string::npos);
  ::setenv("HCOLL_FLIGHT_RECORDER", "some-dir/", 1);
  REQUIRE(Config::fromEnvironment(&c).code() == Code::kInvalidArgument);
  ::setenv("HCOLL_FLIGHT_RECORDER", "fr-ok", 1);
  REQUIRE(Config::fromEnvironment(&c).isOk());
  REQUIRE(c.flightRecorderPath == "fr-ok");
  ::unsetenv("HCOLL_FLIGHT_RECORDER");
}
