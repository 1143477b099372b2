#include <gtest/gtest.h>

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
      for (const std::string& key : (*map)->keys()) EXPECT_TRUE((*map)->find(key).has_value());
    } else {
      EXPECT_EQ(map.error().code, ErrorCode::kInvalidProgram);
    }
  }
}

}  // namespace
}  // namespace etna
