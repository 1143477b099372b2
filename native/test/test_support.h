// Helpers shared by the native test suites.
#pragma once

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/io.h"
#include "core/program.h"
#include "fixtures.h"

namespace etna::test {

// A tensor input over `data` (which must outlive the call that takes it).
template <typename T>
InputValue tensor_input(ScalarType dtype, std::vector<int64_t> shape, const std::vector<T>& data) {
  InputValue value;
  value.kind = InputValue::Kind::kTensor;
  value.tensor.dtype = dtype;
  value.tensor.shape = std::move(shape);
  value.tensor.data = data.data();
  value.tensor.nbytes = data.size() * sizeof(T);
  return value;
}

inline InputValue float_tensor(std::vector<int64_t> shape, const std::vector<float>& data) {
  return tensor_input(ScalarType::kFloat, std::move(shape), data);
}

inline InputValue long_tensor(std::vector<int64_t> shape, const std::vector<int64_t>& data) {
  return tensor_input(ScalarType::kLong, std::move(shape), data);
}

// The fixture program `name`, or null after a failed expectation naming why.
inline std::shared_ptr<const Program> load_program(const std::string& name) {
  auto program = Program::load_file(testdata(name));
  EXPECT_TRUE(program) << (program ? "" : program.error().message);
  return program ? *program : nullptr;
}

// Polls `done` for up to ten seconds; true once it holds.
template <typename Condition>
bool eventually(Condition done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// Threads of this process now (entries of /proc/self/task). The kernel may
// list a thread a moment after it was joined (under QEMU's user-mode
// emulation, for milliseconds): a count expected to fall after a join is
// waited for with eventually().
inline size_t process_threads() {
  size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++count;
  }
  return count;
}

// process_threads() once any thread the runtime starts with the process's
// first thread of its own is there: under ThreadSanitizer, creating a thread
// also starts the sanitizer's background thread, which must not count as one
// the code under test added; and once that first thread is gone from the list.
inline size_t settled_process_threads() {
  std::string task;
  std::thread([&] { task = "/proc/self/task/" + std::to_string(syscall(SYS_gettid)); }).join();
  eventually([&] { return !std::filesystem::exists(task); });
  return process_threads();
}

// The ids of this process's threads, sorted (their /proc/self/task names).
inline std::vector<std::string> thread_ids() {
  std::vector<std::string> ids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    ids.push_back(entry.path().filename().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The threads in `after` that are not in `before` (both from thread_ids()).
inline std::vector<std::string> threads_added(const std::vector<std::string>& before,
                                              const std::vector<std::string>& after) {
  std::vector<std::string> added;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(added));
  return added;
}

// Time a thread of this process has spent running, in milliseconds (the
// scheduler's count in nanoseconds, not sampled at ticks); negative when the
// kernel does not say.
inline double thread_run_ms(const std::string& id) {
  std::ifstream in("/proc/self/task/" + id + "/schedstat");
  unsigned long long nanoseconds = 0;
  in >> nanoseconds;
  return in ? static_cast<double>(nanoseconds) / 1e6 : -1.0;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Replaces the first occurrence of `from` with `to` (same length) in `bytes`.
inline bool patch_bytes(std::vector<uint8_t>& bytes, const std::string& from, const std::string& to) {
  if (from.size() != to.size() || bytes.size() < from.size()) return false;
  for (size_t i = 0; i + from.size() <= bytes.size(); ++i) {
    if (std::equal(from.begin(), from.end(), bytes.begin() + static_cast<long>(i))) {
      std::copy(to.begin(), to.end(), bytes.begin() + static_cast<long>(i));
      return true;
    }
  }
  return false;
}

// A copy of a file in a fresh temporary directory (removed on destruction),
// for tests of what happens when a loaded file changes on disk.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& source) {
    std::string pattern = (std::filesystem::temp_directory_path() / "etna-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) return;
    dir_ = pattern;
    path_ = (dir_ / std::filesystem::path(source).filename()).string();
    std::filesystem::copy_file(source, path_);
  }
  ~ScratchFile() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }
  void truncate(uintmax_t size) const { std::filesystem::resize_file(path_, size); }
  // Writes `bytes` over the start of the file without truncating it.
  void write_in_place(const std::vector<uint8_t>& bytes) const {
    std::fstream out(path_, std::ios::binary | std::ios::in | std::ios::out);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  // Writes `bytes` to a new file and renames it over this one.
  void rename_over(const std::vector<uint8_t>& bytes) const {
    const std::string next = path_ + ".next";
    std::ofstream(next, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    std::filesystem::rename(next, path_);
  }

 private:
  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace etna::test
