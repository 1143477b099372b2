#include "bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "aligned.h"

namespace etna {
namespace {

class MappedFile final : public ByteSource {
 public:
  MappedFile(void* base, size_t size) : base_(base), size_(size) {}
  ~MappedFile() override {
    if (base_ != nullptr) munmap(base_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const override { return static_cast<const uint8_t*>(base_); }
  size_t size() const override { return size_; }

 private:
  void* base_;
  size_t size_;
};

class AlignedBytes final : public ByteSource {
 public:
  // One spare block behind the bytes, so even an empty copy has a valid pointer.
  explicit AlignedBytes(size_t size) : size_(size) {
    if (size <= SIZE_MAX - kAllocationAlignment) data_ = allocate_aligned(size + kAllocationAlignment).data;
  }

  uint8_t* mutable_data() { return data_.get(); }
  const uint8_t* data() const override { return data_.get(); }
  size_t size() const override { return size_; }

 private:
  std::unique_ptr<uint8_t, AlignedFree> data_;
  size_t size_;
};

// Closes a descriptor on every path out of map_file.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

Result<std::unique_ptr<ByteSource>> map_file(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorCode::kInvalidProgram, "cannot open '" + path + "': " + std::strerror(errno));
  }
  FdCloser closer{fd};
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    return make_error(ErrorCode::kInvalidProgram, "cannot stat '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode)) {
    return make_error(ErrorCode::kInvalidProgram, "'" + path + "' is not a regular file");
  }
  const size_t size = static_cast<size_t>(info.st_size);
  if (size == 0) return std::unique_ptr<ByteSource>(new MappedFile(nullptr, 0));
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (base == MAP_FAILED) {
    return make_error(ErrorCode::kInvalidProgram, "cannot map '" + path + "': " + std::strerror(errno));
  }
  return std::unique_ptr<ByteSource>(new MappedFile(base, size));
}

Result<std::unique_ptr<ByteSource>> copy_bytes(const uint8_t* data, size_t size) {
  auto bytes = std::make_unique<AlignedBytes>(size);
  if (bytes->mutable_data() == nullptr) {
    return make_error(ErrorCode::kInternal, "out of memory copying " + std::to_string(size) + " program bytes");
  }
  if (size > 0) std::memcpy(bytes->mutable_data(), data, size);
  return std::unique_ptr<ByteSource>(std::move(bytes));
}

}  // namespace etna
