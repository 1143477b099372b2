#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
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

// A scratch copy of et_arduino_add_model.pte and the program loaded from it.
struct ScratchProgram {
  std::optional<test::ScratchFile> file;
  std::shared_ptr<const Program> program;
};

void load_scratch_copy(ScratchProgram& scratch, FileAccess access) {
  REQUIRE_TESTDATA();
  scratch.file.emplace(testdata_dir() + "/et_arduino_add_model.pte");
  auto program = Program::load_file(scratch.file->path(), access);
  ASSERT_TRUE(program) << program.error().message;
  scratch.program = *program;
}

TEST(ProgramFile, ACopyIgnoresWhatHappensToTheFileLater) {
  ScratchProgram scratch;
  ASSERT_NO_FATAL_FAILURE(load_scratch_copy(scratch, FileAccess::kCopy));
  scratch.file->truncate(0);
  EXPECT_TRUE(scratch.program->check_unchanged());
  EXPECT_EQ(first_constant(*scratch.program), 1.0f);
  EXPECT_EQ(describe_program(*scratch.program).methods.size(), 1u);
}

TEST(ProgramFile, AMappingRefusesOnceTheFileIsTruncated) {
  ScratchProgram scratch;
  ASSERT_NO_FATAL_FAILURE(load_scratch_copy(scratch, FileAccess::kMap));
  EXPECT_TRUE(scratch.program->check_unchanged());
  EXPECT_EQ(first_constant(*scratch.program), 1.0f);
  scratch.file->truncate(0);
  Status status = scratch.program->check_unchanged();
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(status.error().message.find("'" + scratch.file->path() + "' changed on disk"), std::string::npos);
  EXPECT_NE(status.error().message.find("to 0 bytes"), std::string::npos);
  // The tables were copied at load, so describing the program reads no mapped page.
  EXPECT_EQ(describe_program(*scratch.program).methods.size(), 1u);
}

TEST(ProgramFile, AMappingRefusesOnceTheFileIsWrittenInPlace) {
  ScratchProgram scratch;
  ASSERT_NO_FATAL_FAILURE(load_scratch_copy(scratch, FileAccess::kMap));
  scratch.file->write_in_place(std::vector<uint8_t>(64, 0xa5));
  Status status = scratch.program->check_unchanged();
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("written in place"), std::string::npos);
}

TEST(ProgramFile, AMappingKeepsItsFileWhenANewOneIsRenamedOverIt) {
  ScratchProgram scratch;
  ASSERT_NO_FATAL_FAILURE(load_scratch_copy(scratch, FileAccess::kMap));
  scratch.file->rename_over(read_file(testdata_dir() + "/et_add.pte"));
  EXPECT_TRUE(scratch.program->check_unchanged());
  EXPECT_EQ(first_constant(*scratch.program), 1.0f);
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

// ---------------------------------------------------------------- names from pytree specs

using Names = std::vector<std::string>;

constexpr const char* kLeaf = R"({"type": null, "context": null, "children_spec": []})";

std::string dict_spec(const std::string& keys_json, const std::string& children) {
  std::string escaped;
  for (char c : keys_json) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  return R"({"type": "builtins.dict", "context": ")" + escaped + R"(", "children_spec": [)" + children + "]}";
}

std::string tuple_spec(const std::string& children) {
  return R"({"type": "builtins.tuple", "context": "null", "children_spec": [)" + children + "]}";
}

std::string leaves(int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out += (i ? ", " : "") + std::string(kLeaf);
  return out;
}

std::string document(const std::string& spec) { return "[1, " + spec + "]"; }

TEST(PytreeNames, RealExportsWithoutKeywordsGetDefaultNames) {
  REQUIRE_TESTDATA();
  auto program = Program::load_file(testdata_dir() + "/npr_add_xnnpack.pte");
  ASSERT_TRUE(program) << program.error().message;
  const MethodInfo method = describe_method(**program, 0);
  ASSERT_EQ(method.inputs.size(), 2u);
  EXPECT_EQ(method.inputs[0].name, "input_0");
  EXPECT_EQ(method.inputs[1].name, "input_1");
  ASSERT_EQ(method.outputs.size(), 1u);
  EXPECT_EQ(method.outputs[0].name, "output_0");
}

TEST(PytreeNames, KeywordArgumentsAndDictOutputsNameTheirLeaves) {
  // forward(*(), **{"tokens": ..., "start_pos": ...}) as torch.export writes it.
  const std::string inputs =
      document(tuple_spec(tuple_spec("") + ", " + dict_spec(R"(["tokens", "start_pos"])", leaves(2))));
  EXPECT_EQ(pytree_leaf_names(inputs, 2, "input"), (Names{"tokens", "start_pos"}));
  const std::string outputs = document(dict_spec(R"(["logits", "state"])", leaves(2)));
  EXPECT_EQ(pytree_leaf_names(outputs, 2, "output"), (Names{"logits", "state"}));
}

TEST(PytreeNames, PositionalLeavesKeepDefaultsBesideKeywords) {
  const std::string spec = document(tuple_spec(tuple_spec(leaves(2)) + ", " + dict_spec(R"(["mask"])", leaves(1))));
  EXPECT_EQ(pytree_leaf_names(spec, 3, "input"), (Names{"input_0", "input_1", "mask"}));
}

TEST(PytreeNames, NestedDictKeysJoinWithDots) {
  const std::string inner = dict_spec(R"(["k", "v"])", leaves(2));
  const std::string spec =
      document(R"({"type": "collections.OrderedDict", "context": "[\"x\", \"past\"]", "children_spec": [)" +
               std::string(kLeaf) + ", " + inner + "]}");
  EXPECT_EQ(pytree_leaf_names(spec, 3, "input"), (Names{"x", "past.k", "past.v"}));
}

TEST(PytreeNames, EscapedKeysDecodeToUtf8) {
  const std::string spec = document(dict_spec(R"(["caf\u00e9", "\ud83d\ude00", "a\"b"])", leaves(3)));
  EXPECT_EQ(pytree_leaf_names(spec, 3, "output"), (Names{"caf\xC3\xA9", "\xF0\x9F\x98\x80", "a\"b"}));
}

TEST(PytreeNames, MalformedOrUnusableSpecsGiveDefaults) {
  const Names defaults{"input_0", "input_1"};
  const std::string good_dict = dict_spec(R"(["a", "b"])", leaves(2));
  ASSERT_EQ(pytree_leaf_names(document(good_dict), 2, "input"), (Names{"a", "b"}));
  const std::vector<std::string> bad = {
      "",
      "not json",
      "[1, ",
      document(good_dict) + " trailing",
      "[2, " + good_dict + "]",  // unknown protocol
      "[1.0, " + good_dict + "]",
      "[1, " + good_dict + ", 3]",
      "{\"type\": null}",
      document(dict_spec(R"(["a", "b", "c"])", leaves(2))),  // keys and children differ in number
      document(dict_spec(R"(["a", "a"])", leaves(2))),       // repeated name
      document(dict_spec(R"(["a", 1])", leaves(2))),         // non-string key
      document(dict_spec(R"(["a", ""])", leaves(2))),        // empty key
      document(dict_spec(R"(["a", "b")", leaves(2))),        // context is not JSON
      document(dict_spec(R"({"a": 1})", leaves(2))),         // context is not a list
      document(R"({"type": "builtins.dict", "context": null, "children_spec": [)" + leaves(2) + "]}"),
      document(dict_spec(R"(["a", "b"])", leaves(3))),
      document(tuple_spec(leaves(3))),  // three leaves for two values
      document(tuple_spec(leaves(1))),
      document(R"({"type": null, "context": null, "children_spec": [)" + leaves(2) + "]}"),  // leaf with children
      document(R"({"type": 7, "context": null, "children_spec": [)" + leaves(2) + "]}"),
      document(R"({"type": "builtins.tuple", "context": "null", "children_spec": {}})"),
      document(dict_spec(R"(["\ud83d", "b"])", leaves(2))),  // lone surrogate
      document(dict_spec(R"(["\q", "b"])", leaves(2))),      // unknown escape
      document(dict_spec(R"(["\u12", "b"])", leaves(2))),
      "[1, {\"type\": \"builtins.tuple\", \"context\": \"null\", \"children_spec\": [\"\x01\"]}]",
      document(dict_spec(R"(["a", "b"])", leaves(2))).replace(22, 1, 1, '\0'),  // NUL inside "builtins.dict"
  };
  for (const std::string& spec : bad) EXPECT_EQ(pytree_leaf_names(spec, 2, "input"), defaults) << spec;
  // A key equal to another leaf's default name would repeat it.
  const std::string clash = document(tuple_spec(tuple_spec(leaves(1)) + ", " + dict_spec(R"(["input_0"])", leaves(1))));
  EXPECT_EQ(pytree_leaf_names(clash, 2, "input"), defaults);
  // Every prefix of a valid spec is handled (all but the full text give defaults).
  const std::string full = document(tuple_spec(tuple_spec("") + ", " + good_dict));
  for (size_t cut = 0; cut < full.size(); ++cut)
    EXPECT_EQ(pytree_leaf_names(full.substr(0, cut), 2, "input"), defaults);
}

TEST(PytreeNames, DeepNestingIsRejectedWithoutExhaustingTheStack) {
  const std::string deep = "[1, " + std::string(100000, '[') + std::string(100000, ']') + "]";
  EXPECT_EQ(pytree_leaf_names(deep, 1, "output"), (Names{"output_0"}));
  std::string nested = kLeaf;
  for (int i = 0; i < 40; ++i) nested = dict_spec(R"(["k"])", nested);
  EXPECT_EQ(pytree_leaf_names(document(nested), 1, "output"), (Names{"output_0"}));
  EXPECT_EQ(pytree_leaf_names("", 0, "output"), Names{});
}

}  // namespace
}  // namespace etna
