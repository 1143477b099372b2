#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/data_map.h"
#include "test_support.h"

namespace etna {
namespace {

TEST(DataMap, ReadsTheTrainingParameters) {
  ETNA_REQUIRE_TESTDATA();
  auto map = DataMap::load_file(test::testdata("et_xor_training.ptd"));
  ASSERT_TRUE(map) << map.error().message;
  EXPECT_EQ((*map)->size(), 4u);
  auto weight = (*map)->find("net.linear.weight");
  ASSERT_TRUE(weight.has_value());
  EXPECT_EQ(weight->bytes.size, 10u * 2u * sizeof(float));
  EXPECT_FALSE((*map)->find("net.missing").has_value());
}

TEST(DataMapFile, ACopyKeepsItsBlobsWhenTheFileIsTruncated) {
  ETNA_REQUIRE_TESTDATA();
  test::ScratchFile file(test::testdata("et_xor_training.ptd"));
  const auto original = test::read_file(file.path());
  auto map = DataMap::load_file(file.path());
  ASSERT_TRUE(map) << map.error().message;
  const auto weight = (*map)->find("net.linear.weight");
  ASSERT_TRUE(weight.has_value());
  const std::vector<uint8_t> before(weight->bytes.data, weight->bytes.data + weight->bytes.size);
  file.truncate(0);
  EXPECT_TRUE((*map)->check_unchanged());
  EXPECT_EQ(std::vector<uint8_t>(weight->bytes.data, weight->bytes.data + weight->bytes.size), before);
  EXPECT_TRUE(std::search(original.begin(), original.end(), before.begin(), before.end()) != original.end());
}

TEST(DataMapFile, AMappingRefusesOnceTheFileIsTruncated) {
  ETNA_REQUIRE_TESTDATA();
  test::ScratchFile file(test::testdata("et_xor_training.ptd"));
  auto map = DataMap::load_file(file.path(), FileAccess::kMap);
  ASSERT_TRUE(map) << map.error().message;
  auto program = Program::load_file(test::testdata("et_xor_training.pte"));
  ASSERT_TRUE(program) << program.error().message;
  EXPECT_TRUE(check_unchanged(**program, map->get()));
  file.truncate(0);
  // The question a module asks before reading file bytes covers its .ptd too.
  Status status = check_unchanged(**program, map->get());
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(status.error().message.find("'" + file.path() + "' changed on disk"), std::string::npos);
  EXPECT_TRUE(check_unchanged(**program, nullptr));
}

TEST(DataMap, DamagedFilesGiveErrorsNotCrashes) {
  ETNA_REQUIRE_TESTDATA();
  const auto original = test::read_file(test::testdata("et_xor_training.ptd"));
  ASSERT_FALSE(original.empty());
  size_t rejected = 0;
  for (size_t cut = 0; cut < original.size(); ++cut) {
    if (!DataMap::load_bytes(original.data(), cut)) ++rejected;
  }
  EXPECT_EQ(rejected, original.size());  // every strict prefix is missing segment bytes
  uint32_t seed = 99;
  for (int trial = 0; trial < 5000; ++trial) {
    auto bytes = original;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1664525u + 1013904223u;
      bytes[seed % bytes.size()] ^= static_cast<uint8_t>(1 + (seed >> 24) % 255);
    }
    auto map = DataMap::load_bytes(bytes.data(), bytes.size());
    if (map) {
      for (const auto& entry : (*map)->entries()) EXPECT_TRUE((*map)->find(entry.first).has_value());
    } else {
      EXPECT_EQ(map.error().code, ErrorCode::kInvalidProgram);
    }
  }
}

}  // namespace
}  // namespace etna
