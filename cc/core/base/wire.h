// WireWriter / WireReader: little-endian binary encoding used by the store protocol and the
// coordinator messages. The reader never trusts its input: every read is bounds-checked and
// a malformed buffer yields ok() == false instead of a crash (fuzzed in tests).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tfring {

class WireWriter {
 public:
  void U8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void I32(int32_t v) { Raw(&v, 4); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  void Str(const std::string& s) {
    U32(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  void I64s(const std::vector<int64_t>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (int64_t x : v) I64(x);
  }
  const std::string& data() const { return buf_; }
  void F64s(const std::vector<double>& v) {
    U32(static_cast<uint32_t>(v.size()));
    for (double x : v) F64(x);
  }
  std::string Take() { return std::move(buf_); }

 private:
  void Raw(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }  // host is LE
  std::string buf_;
};

class WireReader {
 public:
  explicit WireReader(const std::string& data) : data_(data) {}

  uint8_t U8() { uint8_t v = 0; Raw(&v, 1); return v; }
  uint32_t U32() { uint32_t v = 0; Raw(&v, 4); return v; }
  int32_t I32() { int32_t v = 0; Raw(&v, 4); return v; }
  int64_t I64() { int64_t v = 0; Raw(&v, 8); return v; }
  double F64() { double v = 0; Raw(&v, 8); return v; }
  std::string Str() {
    uint32_t n = U32();
    if (!ok_ || n > Remaining()) { ok_ = false; return {}; }
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<int64_t> I64s() { return Vector8<int64_t>(); }
  std::vector<double> F64s() { return Vector8<double>(); }
  // Reads a count that precedes `min_item_bytes`-sized items; fails if it cannot fit.
  uint32_t Count(size_t min_item_bytes) {
    uint32_t n = U32();
    if (!ok_ || static_cast<uint64_t>(n) * min_item_bytes > Remaining()) { ok_ = false; return 0; }
    return n;
  }

  bool ok() const { return ok_; }
  bool AtEnd() const { return pos_ == data_.size(); }
  size_t Remaining() const { return data_.size() - pos_; }

 private:
  // A count, then that many 8-byte values.
  template <typename T>
  std::vector<T> Vector8() {
    static_assert(sizeof(T) == 8, "8-byte items");
    uint32_t n = U32();
    if (!ok_ || static_cast<uint64_t>(n) * 8 > Remaining()) { ok_ = false; return {}; }
    std::vector<T> v(n);
    for (auto& x : v) Raw(&x, 8);
    return v;
  }
  void Raw(void* p, size_t n) {
    if (!ok_ || n > Remaining()) { ok_ = false; std::memset(p, 0, n); return; }
    std::memcpy(p, data_.data() + pos_, n);
    pos_ += n;
  }
  const std::string& data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace tfring
