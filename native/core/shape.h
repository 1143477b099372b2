// A shape held by value: a rank and up to MaxRank dims. Portable kernels use
// signed int64_t dims (the pte format's sizes), the XNNPACK delegate size_t
// dims (XNNPACK's own type); both share this one definition.
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace etna {

template <typename Dim, size_t MaxRank>
struct BasicShape {
  size_t rank = 0;
  std::array<Dim, MaxRank> dims{};

  Dim operator[](size_t i) const { return dims[i]; }
  Dim& operator[](size_t i) { return dims[i]; }
  const Dim* data() const { return dims.data(); }

  // Element count; callers only use it on shapes whose product was checked.
  Dim numel() const {
    Dim n = 1;
    for (size_t i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }

  bool operator==(const BasicShape& other) const {
    if (rank != other.rank) return false;
    for (size_t i = 0; i < rank; ++i) {
      if (dims[i] != other.dims[i]) return false;
    }
    return true;
  }
  bool operator!=(const BasicShape& other) const { return !(*this == other); }

  // "[1, 3, 16, 16]"
  std::string to_string() const {
    std::string text = "[";
    for (size_t i = 0; i < rank; ++i) {
      if (i) text += ", ";
      text += std::to_string(dims[i]);
    }
    return text + "]";
  }
};

}  // namespace etna
