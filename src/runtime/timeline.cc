#include "runtime/timeline.h"

#include <filesystem>

namespace hcoll::runtime {

namespace {

// Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or 0 if the bytes there are not one.
size_t utf8SequenceLength(const unsigned char* p, size_t left) {
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < left && p[i] >= lo && p[i] <= hi;
  };
  const unsigned char c = p[0];
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    const unsigned char lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    const unsigned char lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

// Operation names are arbitrary bytes, but JSON text must be UTF-8: a byte that does not start a
// well-formed sequence is written as the code point of the same value (\u00XX), so the trace stays
// valid JSON and the byte stays visible.
std::string jsonEscape(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  const auto* bytes = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = bytes[i];
    if (c >= 0x80) {
      if (size_t len = utf8SequenceLength(bytes + i, s.size() - i); len > 0) {
        out.append(s, i, len);
        i += len - 1;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

Status Timeline::start(const std::string& path) {
  std::string file = path;
  if (path.empty()) return invalidArgument("the path is empty");
  // A directory would get hidden per-rank files "<dir>/.0", "<dir>/.1" (or, at one rank, fail
  // to open): refused like an unwritable path.
  std::error_code ec;
  if (path.back() == '/' || std::filesystem::is_directory(path, ec)) {
    return invalidArgument("'" + path +
                           "' is a directory; it must name a file (per-rank files get the "
                           "suffix .<rank>, or %r is replaced by the rank)");
  }
  if (auto at = file.find("%r"); at != std::string::npos) {
    file.replace(at, 2, std::to_string(worldRank_));
  } else if (worldSize_ > 1) {
    file += "." + std::to_string(worldRank_);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  closeFile();  // before opening: restarting on the same path truncates a finished file
  std::FILE* f = std::fopen(file.c_str(), "w");
  if (f == nullptr) return invalidArgument("cannot open '" + file + "' for writing");
  std::fputs("[\n", f);
  file_ = f;
  first_ = true;
  origin_ = Clock::now();
  rows_.clear();
  nextRow_.clear();
  for (int comm = 0; comm < static_cast<int>(labels_.size()); ++comm) writeTrackNames(comm);
  active_.store(true, std::memory_order_relaxed);
  return Status::ok();
}

void Timeline::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  closeFile();
}

Timeline::~Timeline() {
  stop();
}

void Timeline::closeFile() {
  active_.store(false, std::memory_order_relaxed);
  if (file_ == nullptr) return;
  std::fputs("\n]\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

int64_t Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration_cast<std::chrono::microseconds>(t - origin_).count();
}

void Timeline::writeEvent(const std::string& json) {
  if (file_ == nullptr) return;
  if (!first_) std::fputs(",\n", file_);
  first_ = false;
  std::fputs(json.c_str(), file_);
}

int Timeline::registerCommunicator(const std::string& label) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int id = static_cast<int>(labels_.size());
  labels_.push_back(label);
  writeTrackNames(id);
  return id;
}

void Timeline::writeTrackNames(int comm) {
  nextRow_[comm] = 1;
  const std::string pid = std::to_string(comm);
  writeEvent(R"({"name":"process_name","ph":"M","pid":)" + pid + R"(,"args":{"name":")" + pid +
             ": " + jsonEscape(labels_[comm]) + R"("}})");
  writeEvent(R"({"name":"thread_name","ph":"M","pid":)" + pid +
             R"(,"tid":0,"args":{"name":"negotiation cycles"}})");
}

int Timeline::rowOf(int comm, const std::string& name) {
  std::string key = std::to_string(comm) + "/" + name;
  auto it = rows_.find(key);
  if (it != rows_.end()) return it->second;
  int tid = nextRow_[comm]++;
  rows_.emplace(std::move(key), tid);
  writeEvent(R"({"name":"thread_name","ph":"M","pid":)" + std::to_string(comm) + R"(,"tid":)" +
             std::to_string(tid) + R"(,"args":{"name":")" + jsonEscape(name) + R"("}})");
  return tid;
}

void Timeline::cycle(int comm, Clock::time_point start, Clock::time_point end, bool slowPath,
                     size_t responses) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  writeEvent(R"({"name":"CYCLE","ph":"X","pid":)" + std::to_string(comm) + R"(,"tid":0,"ts":)" +
             std::to_string(micros(start)) + R"(,"dur":)" + std::to_string(micros(end) - micros(start)) +
             R"(,"args":{"slow_path":)" + (slowPath ? "true" : "false") + R"(,"responses":)" +
             std::to_string(responses) + "}}");
}

void Timeline::tensorSpan(int comm, const std::string& name, const char* phase,
                          Clock::time_point start, Clock::time_point end,
                          const std::string& argsJson) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  int tid = rowOf(comm, name);
  writeEvent(R"({"name":")" + std::string(phase) + R"(","ph":"X","pid":)" + std::to_string(comm) +
             R"(,"tid":)" + std::to_string(tid) + R"(,"ts":)" + std::to_string(micros(start)) +
             R"(,"dur":)" + std::to_string(micros(end) - micros(start)) + R"(,"args":)" +
             (argsJson.empty() ? "{}" : argsJson) + "}");
}

}  // namespace hcoll::runtime
