#pragma once
// Redirects this process's stderr (fd 2, where hcoll's log goes) into a file while alive, so a
// test can assert on what was logged; text() reads what was written so far.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace htest {

class StderrCapture {
 public:
  explicit StderrCapture(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    FILE* f = std::fopen(path_.c_str(), "w");
    if (f != nullptr) {
      ::dup2(::fileno(f), 2);
      std::fclose(f);
    }
  }
  ~StderrCapture() {
    std::fflush(stderr);
    if (saved_ >= 0) {
      ::dup2(saved_, 2);
      ::close(saved_);
    }
    // Replay what was captured, so ctest --output-on-failure still shows the log.
    std::fputs(text().c_str(), stderr);
  }
  std::string text() const {
    std::fflush(stderr);
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace htest
