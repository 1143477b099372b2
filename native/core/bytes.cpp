#include "bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "aligned.h"

namespace etna {
namespace {

// Call right after the failing system call: it reports errno.
Error file_error(const std::string& what, const std::string& path) {
  const int error = errno;
  return make_error(ErrorCode::kInvalidProgram, "cannot " + what + " '" + path + "': " + std::strerror(error));
}

// An open descriptor, closed on every path out.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor& operator=(FileDescriptor&&) = delete;

  int get() const { return fd_; }

 private:
  int fd_;
};

struct OpenFile {
  FileDescriptor fd;
  struct stat info;
};

Result<OpenFile> open_regular_file(const std::string& path) {
  FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return file_error("open", path);
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) return file_error("stat", path);
  if (!S_ISREG(info.st_mode)) {
    return make_error(ErrorCode::kInvalidProgram, "'" + path + "' is not a regular file");
  }
  return OpenFile{std::move(fd), info};
}

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

Result<std::unique_ptr<AlignedBytes>> allocate(size_t size) {
  auto bytes = std::make_unique<AlignedBytes>(size);
  if (bytes->mutable_data() == nullptr) {
    return make_error(ErrorCode::kInternal, "out of memory allocating " + std::to_string(size) + " bytes");
  }
  return Result<std::unique_ptr<AlignedBytes>>(std::move(bytes));
}

// Keeps the descriptor so that each call can ask, for the price of one fstat,
// whether the file still is what was mapped. Only the size and modification
// time can tell: the descriptor's inode never changes (a file renamed over the
// path is a different inode, and harmless), and the status-change time also
// moves when the mapped inode merely loses its name to such a rename.
class MappedFile final : public ByteSource {
 public:
  MappedFile(std::string path, OpenFile file, void* base)
      : path_(std::move(path)), file_(std::move(file)), base_(base) {}
  ~MappedFile() override {
    if (base_ != nullptr) munmap(base_, size());
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const override { return static_cast<const uint8_t*>(base_); }
  size_t size() const override { return static_cast<size_t>(file_.info.st_size); }
  bool mapped() const override { return true; }

  // The mapping is read-only and private, so it holds no page of its own:
  // MADV_DONTNEED only unmaps file pages, which the next read maps again.
  void release_pages(size_t offset, size_t size) const override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t end = std::min(offset + size, this->size());
    const size_t first = (offset + page - 1) / page * page, last = end / page * page;
    if (last > first) madvise(static_cast<uint8_t*>(base_) + first, last - first, MADV_DONTNEED);
  }

  Status check_unchanged() const override {
    struct stat now {};
    if (fstat(file_.fd.get(), &now) != 0) return file_error("stat mapped file", path_);
    const struct stat& then = file_.info;
    std::string change;
    if (now.st_size != then.st_size) {
      change = "its size went from " + std::to_string(then.st_size) + " to " + std::to_string(now.st_size) + " bytes";
    } else if (now.st_mtim.tv_sec != then.st_mtim.tv_sec || now.st_mtim.tv_nsec != then.st_mtim.tv_nsec) {
      change = "it was written in place";
    } else {
      return Status::ok();
    }
    return make_error(ErrorCode::kInvalidProgram,
                      "'" + path_ + "' changed on disk after it was mapped (" + change +
                          "); calls on it are refused from now on. Replace a mapped file by renaming a new file "
                          "over it, never by writing into it, or load it without mmap");
  }

 private:
  std::string path_;
  OpenFile file_;
  void* base_;
};

Result<std::unique_ptr<ByteSource>> read_file(const std::string& path) {
  auto file = open_regular_file(path);
  if (!file) return file.error();
  const size_t size = static_cast<size_t>(file->info.st_size);
  auto bytes = allocate(size);
  if (!bytes) return bytes.error();
  // One sequential pass straight into the aligned copy; read() may return
  // less than asked (signals, very large files), so loop until done.
  posix_fadvise(file->fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = read(file->fd.get(), (*bytes)->mutable_data() + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return file_error("read", path);
    if (n == 0) {
      return make_error(ErrorCode::kInvalidProgram, "'" + path + "' shrank from " + std::to_string(size) + " to " +
                                                        std::to_string(done) + " bytes while it was read");
    }
    done += static_cast<size_t>(n);
  }
  return std::unique_ptr<ByteSource>(std::move(*bytes));
}

Result<std::unique_ptr<ByteSource>> map_file(const std::string& path) {
  auto file = open_regular_file(path);
  if (!file) return file.error();
  const size_t size = static_cast<size_t>(file->info.st_size);
  void* base = nullptr;
  if (size > 0) {
    base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd.get(), 0);
    if (base == MAP_FAILED) return file_error("map", path);
  }
  return std::unique_ptr<ByteSource>(new MappedFile(path, std::move(*file), base));
}

}  // namespace

Result<std::unique_ptr<ByteSource>> load_file_bytes(const std::string& path, FileAccess access) {
  return access == FileAccess::kMap ? map_file(path) : read_file(path);
}

Result<std::unique_ptr<ByteSource>> copy_bytes(const uint8_t* data, size_t size) {
  auto bytes = allocate(size);
  if (!bytes) return bytes.error();
  if (size > 0) std::memcpy((*bytes)->mutable_data(), data, size);
  return std::unique_ptr<ByteSource>(std::move(*bytes));
}

}  // namespace etna
