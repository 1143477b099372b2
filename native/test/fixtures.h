// Where the real .pte files live: test/fixtures/pte in the repository (its
// README gives each file's provenance), or $ETNA_TESTDATA. A test whose
// fixture is missing fails, naming the path it looked in; none is skipped.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace etna::test {

inline std::string testdata_dir() {
  if (const char* dir = std::getenv("ETNA_TESTDATA")) return dir;
  return ETNA_TESTDATA_DIR;
}

inline std::string testdata(const std::string& name) { return testdata_dir() + "/" + name; }

inline bool have_testdata() { return std::filesystem::exists(testdata("et_add.pte")); }

}  // namespace etna::test

// For GoogleTest bodies: fails the test (never skips it) when the fixtures are absent.
#define ETNA_REQUIRE_TESTDATA() \
  if (!::etna::test::have_testdata()) GTEST_FAIL() << "test fixtures not found in " << ::etna::test::testdata_dir()
