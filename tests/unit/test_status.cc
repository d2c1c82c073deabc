// Status (common/status.h): a success carries no message and copies none; a failure's message
// is shared by its copies and survives the original.
#include <catch2/catch.hpp>

#include <string>
#include <utility>

#include "common/status.h"

using namespace hcoll;

TEST_CASE("a status keeps its code and message through copies and moves", "[status]") {
  Status ok;
  REQUIRE(ok.isOk());
  REQUIRE(ok.code() == Code::kSuccess);
  REQUIRE(ok.message().empty());
  REQUIRE(Status::ok().message().empty());

  const std::string text(64, 'm');  // longer than a string's inline buffer
  Status copy;
  {
    Status failed(Code::kMismatch, text);
    REQUIRE_FALSE(failed.isOk());
    REQUIRE(failed.message() == text);
    copy = failed;
  }  // the original is gone: the copy still has the message
  REQUIRE(copy.code() == Code::kMismatch);
  REQUIRE(copy.message() == text);

  Status moved(std::move(copy));
  REQUIRE(moved.code() == Code::kMismatch);
  REQUIRE(moved.message() == text);

  // An empty message is no message, whatever the code.
  Status bare(Code::kTimeout, "");
  REQUIRE(bare.code() == Code::kTimeout);
  REQUIRE(bare.message().empty());

  // Assigning a success over a failure drops the message.
  moved = Status::ok();
  REQUIRE(moved.isOk());
  REQUIRE(moved.message().empty());
}
