#pragma once
// A tensor's dimensions, stored inline up to kInline dims (nearly every tensor), on the heap
// beyond. Every member of every operation carries one (its MemberSpec): as a std::vector it was
// one allocation per member, which for a grouped call of 100 small tensors was a third of
// the runtime's own work (and glibc's tcache holds only 7 chunks of a size: the rest went through
// its slow paths). The interface is the subset of std::vector the core uses.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace hcoll {

class Shape {
 public:
  static constexpr size_t kInline = 6;
  using value_type = int64_t;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const int64_t* first, const int64_t* last) { assign(first, last); }
  // Implicit, like a conversion between two vectors: shapes built as vectors (tests, the wire)
  // keep working.
  Shape(const std::vector<int64_t>& dims)  // NOLINT(google-explicit-constructor)
      : Shape(dims.data(), dims.data() + dims.size()) {}
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept : size_(other.size_), heap_(std::move(other.heap_)) {
    std::copy(other.inline_, other.inline_ + std::min(size_, kInline), inline_);
    other.size_ = 0;
  }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      size_ = other.size_;
      heap_ = std::move(other.heap_);
      std::copy(other.inline_, other.inline_ + std::min(size_, kInline), inline_);
      other.size_ = 0;
    }
    return *this;
  }

  void assign(const int64_t* first, const int64_t* last) {
    size_ = static_cast<size_t>(last - first);
    if (size_ <= kInline) {
      heap_.clear();
      std::copy(first, last, inline_);
    } else {
      heap_.assign(first, last);
    }
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t* data() { return size_ <= kInline ? inline_ : heap_.data(); }
  const int64_t* data() const { return size_ <= kInline ? inline_ : heap_.data(); }
  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  int64_t& operator[](size_t i) { return data()[i]; }
  int64_t operator[](size_t i) const { return data()[i]; }
  int64_t front() const { return data()[0]; }
  int64_t back() const { return data()[size_ - 1]; }

  void clear() {
    size_ = 0;
    heap_.clear();
  }
  void push_back(int64_t d) {
    if (size_ < kInline) {
      inline_[size_++] = d;
      return;
    }
    if (size_ == kInline) heap_.assign(inline_, inline_ + kInline);
    heap_.push_back(d);
    ++size_;
  }
  std::vector<int64_t> toVector() const { return std::vector<int64_t>(begin(), end()); }

  friend bool operator==(const Shape& a, const Shape& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  size_t size_ = 0;
  int64_t inline_[kInline] = {};
  std::vector<int64_t> heap_;  // the dims when there are more than kInline (else empty)
};

}  // namespace hcoll
