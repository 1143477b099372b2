#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/program.h"
#include "core/program_info.h"
#include "test_support.h"

namespace etna {
namespace {

using test::read_file;
using test::testdata_dir;
#define REQUIRE_TESTDATA() ETNA_REQUIRE_TESTDATA()

TEST(Program, LoadsAddFromFile) {
  REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/et_add.pte");
  ASSERT_TRUE(program) << program.error().message;
  ProgramInfo info = describe_program(**program);
  ASSERT_EQ(info.methods.size(), 1u);
  EXPECT_EQ(info.methods[0].name, "forward");
  EXPECT_EQ(info.methods[0].operators, std::vector<std::string>{"aten::add.out"});
  EXPECT_EQ(info.methods[0].memory_plan, (std::vector<int64_t>{0, 48}));
  EXPECT_FALSE(info.extended_header.has_value());
}

TEST(Program, ReadsExtendedHeaderAndSegmentConstants) {
  REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/et_arduino_add_model.pte");
  ASSERT_TRUE(program) << program.error().message;
  const auto& header = (*program)->extended_header();
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->header_length, 32u);
  EXPECT_EQ(header->program_size, 1040u);
  EXPECT_EQ(header->segment_base_offset, 1152u);
  auto constant = (*program)->constant_data(1, 4);
  ASSERT_TRUE(constant) << constant.error().message;
  float value = 0;
  std::memcpy(&value, constant->data, 4);
  EXPECT_EQ(value, 1.0f);
}

TEST(Program, ReadsDeprecatedInlineConstants) {
  REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/et_ModuleLinear-no-constant-segment.pte");
  ASSERT_TRUE(program) << program.error().message;
  auto constant = (*program)->constant_data(1, 16);
  ASSERT_TRUE(constant) << constant.error().message;
  float values[4];
  std::memcpy(values, constant->data, 16);
  for (float v : values) EXPECT_EQ(v, 3.0f);
}

// et_arduino_add_model.pte keeps its constants in a segment; constant 1 is 1.0f.
float first_constant(const Program& program) {
  auto constant = program.constant_data(1, 4);
  if (!constant) return -1;
  float value = 0;
  std::memcpy(&value, constant->data, 4);
  return value;
}

TEST(ProgramFile, ACopyIgnoresWhatHappensToTheFileLater) {
  REQUIRE_TESTDATA();
  test::ScratchFile file(testdata_dir() + "/et_arduino_add_model.pte");
  auto program = Program::load_file(file.path());
  ASSERT_TRUE(program) << program.error().message;
  file.truncate(0);
  EXPECT_TRUE((*program)->check_unchanged());
  EXPECT_EQ(first_constant(**program), 1.0f);
  EXPECT_EQ(describe_program(**program).methods.size(), 1u);
}

TEST(ProgramFile, AMappingRefusesOnceTheFileIsTruncated) {
  REQUIRE_TESTDATA();
  test::ScratchFile file(testdata_dir() + "/et_arduino_add_model.pte");
  auto program = Program::load_file(file.path(), FileAccess::kMap);
  ASSERT_TRUE(program) << program.error().message;
  EXPECT_TRUE((*program)->check_unchanged());
  EXPECT_EQ(first_constant(**program), 1.0f);
  file.truncate(0);
  Status status = (*program)->check_unchanged();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(status.error().message.find("'" + file.path() + "' changed on disk"), std::string::npos);
  EXPECT_NE(status.error().message.find("to 0 bytes"), std::string::npos);
  // The tables were copied at load, so describing the program reads no mapped page.
  EXPECT_EQ(describe_program(**program).methods.size(), 1u);
}

TEST(ProgramFile, AMappingRefusesOnceTheFileIsWrittenInPlace) {
  REQUIRE_TESTDATA();
  test::ScratchFile file(testdata_dir() + "/et_arduino_add_model.pte");
  auto program = Program::load_file(file.path(), FileAccess::kMap);
  ASSERT_TRUE(program) << program.error().message;
  file.write_in_place(std::vector<uint8_t>(64, 0xa5));
  Status status = (*program)->check_unchanged();
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("written in place"), std::string::npos);
}

TEST(ProgramFile, AMappingKeepsItsFileWhenANewOneIsRenamedOverIt) {
  REQUIRE_TESTDATA();
  test::ScratchFile file(testdata_dir() + "/et_arduino_add_model.pte");
  auto program = Program::load_file(file.path(), FileAccess::kMap);
  ASSERT_TRUE(program) << program.error().message;
  file.rename_over(read_file(testdata_dir() + "/et_add.pte"));
  EXPECT_TRUE((*program)->check_unchanged());
  EXPECT_EQ(first_constant(**program), 1.0f);
}

TEST(ProgramFile, AMissingFileIsNamed) {
  const std::string missing = testdata_dir() + "/no-such-program.pte";
  for (FileAccess access : {FileAccess::kCopy, FileAccess::kMap}) {
    auto program = Program::load_file(missing, access);
    ASSERT_FALSE(program);
    EXPECT_EQ(program.error().code, ErrorCode::kInvalidProgram);
    EXPECT_NE(program.error().message.find("cannot open '" + missing + "'"), std::string::npos);
  }
}

TEST(Program, RejectsCorruptFileWithReason) {
  REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/djl_corrupt.pte");
  ASSERT_FALSE(program);
  EXPECT_EQ(program.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(program.error().message.find("expected 'ET12'"), std::string::npos) << program.error().message;
}

TEST(Program, RejectsEmptyAndTinyInputs) {
  auto empty = Program::load_bytes(nullptr, 0);
  ASSERT_FALSE(empty);
  const uint8_t tiny[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_FALSE(Program::load_bytes(tiny, sizeof tiny));
}

TEST(Program, RejectsOtherVersions) {
  std::vector<uint8_t> bytes(64, 0);
  std::memcpy(bytes.data() + 4, "ET11", 4);
  auto program = Program::load_bytes(bytes.data(), bytes.size());
  ASSERT_FALSE(program);
  EXPECT_NE(program.error().message.find("unsupported program version"), std::string::npos);
}

// Every prefix and many single-byte corruptions of every real file either load
// or fail with INVALID_PROGRAM; under the sanitizer build this also proves no
// out-of-bounds read happens on the way.
TEST(Program, TruncatedAndCorruptedFilesNeverCrash) {
  REQUIRE_TESTDATA();
  const char* files[] = {"et_add.pte",           "et_arduino_add_model.pte", "et_ModuleLinear-no-constant-segment.pte",
                         "npr_multi_method.pte", "djl_conv_xnnpack.pte",     "et_xor_training.pte",
                         "npr_dtypes.pte",       "djl_lin129_planned.pte",   "et_model_constant_buffer.pte"};
  size_t rejected = 0;
  for (const char* name : files) {
    const std::vector<uint8_t> original = read_file(testdata_dir() + "/" + name);
    ASSERT_FALSE(original.empty()) << name;
    const size_t step = std::max<size_t>(1, original.size() / 300);
    for (size_t cut = 0; cut < original.size(); cut += step) {
      auto program = Program::load_bytes(original.data(), cut);
      if (!program) {
        ++rejected;
        EXPECT_EQ(program.error().code, ErrorCode::kInvalidProgram);
      } else {
        (void)describe_program(**program);
      }
    }
    uint32_t seed = 12345;
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<uint8_t> bytes = original;
      seed = seed * 1664525u + 1013904223u;
      const int flips = 1 + static_cast<int>(seed % 4);
      for (int k = 0; k < flips; ++k) {
        seed = seed * 1664525u + 1013904223u;
        const size_t position = seed % bytes.size();
        seed = seed * 1664525u + 1013904223u;
        bytes[position] ^= static_cast<uint8_t>(1 + seed % 255);
      }
      auto program = Program::load_bytes(bytes.data(), bytes.size());
      if (!program) {
        ++rejected;
        EXPECT_FALSE(program.error().message.empty());
      } else {
        (void)describe_program(**program);
      }
    }
  }
  EXPECT_GT(rejected, 0u);
}

}  // namespace
}  // namespace etna
