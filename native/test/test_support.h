// Helpers shared by the native test suites.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace etna::test {

inline std::string testdata_dir() {
  if (const char* dir = std::getenv("ETNA_TESTDATA")) return dir;
  return ETNA_TESTDATA_DIR;
}

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline bool have_testdata() { return !read_file(testdata_dir() + "/et_add.pte").empty(); }

inline std::string testdata(const std::string& name) { return testdata_dir() + "/" + name; }

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

}  // namespace etna::test

#define ETNA_REQUIRE_TESTDATA() \
  if (!::etna::test::have_testdata()) GTEST_SKIP() << "no testdata at " << ::etna::test::testdata_dir();
