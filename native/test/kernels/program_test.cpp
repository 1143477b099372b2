// The kernels run the real test programs. A minimal interpreter (every
// tensor gets its own zeroed buffer, constants are copied in) executes each
// KernelCall with the argument slots exactly as the file serializes them, so
// argument orders, kinds and defaults are checked against real exporters and
// the README's expected results.

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "core/program.h"
#include "fixtures.h"
#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

using ::etna::test::testdata_dir;

#define REQUIRE_PROGRAM(program, file)                                           \
  if (!std::filesystem::exists(testdata_dir() + "/" + file)) {                   \
    GTEST_FAIL() << "test fixture not found: " << testdata_dir() << "/" << file; \
  }                                                                              \
  auto program##_result = Program::load_file(testdata_dir() + "/" + file);       \
  ASSERT_TRUE(program##_result) << program##_result.error().message;             \
  const Program& program = **program##_result

// One method's values, built from the file, and a loop over its KernelCalls.
class KernelOnlyMethod {
 public:
  Status load(const Program& program, std::string_view name) {
    const auto index = program.find_method(name);
    if (!index) return make_error(ErrorCode::kMethodNotFound, std::string(name));
    plan_ = &program.method(*index);
    const auto& values = *plan_->values();
    slots_.resize(values.size());
    for (uint32_t i = 0; i < values.size(); ++i) {
      const fb::EValue& value = *values.Get(i);
      EValue& slot = slots_[i];
      switch (value.val_type()) {
        case fb::KernelTypes::IntValue: slot = EValue::from_int(value.val_as_IntValue()->int_val()); break;
        case fb::KernelTypes::BoolValue: slot = EValue::from_bool(value.val_as_BoolValue()->bool_val()); break;
        case fb::KernelTypes::DoubleValue: slot = EValue::from_double(value.val_as_DoubleValue()->double_val()); break;
        case fb::KernelTypes::StringValue: {
          const auto* text = value.val_as_StringValue()->string_val();
          slot = EValue::from_string(std::string_view(text->c_str(), text->size()));
        } break;
        case fb::KernelTypes::Tensor: ETNA_TRY(make_tensor(program, *value.val_as_Tensor(), slot)); break;
        case fb::KernelTypes::IntList: {
          const auto* items = value.val_as_IntList()->items();
          auto& pointers = lists_.emplace_back();
          for (int64_t item : *items) pointers.push_back(&slots_[static_cast<size_t>(item)]);
          slot = EValue::from_int_list(pointers.data(), pointers.size());
          break;
        }
        case fb::KernelTypes::TensorList:
        case fb::KernelTypes::OptionalTensorList: {
          const bool optional = value.val_type() == fb::KernelTypes::OptionalTensorList;
          const auto* items =
              optional ? value.val_as_OptionalTensorList()->items() : value.val_as_TensorList()->items();
          auto& pointers = lists_.emplace_back();
          for (int32_t item : *items) pointers.push_back(item < 0 ? nullptr : &slots_[static_cast<size_t>(item)]);
          slot = EValue::from_tensor_list(pointers.data(), pointers.size(), optional);
          break;
        }
        default: slot = EValue::none(); break;
      }
    }
    return Status::ok();
  }

  Tensor& input(size_t i) {
    return slots_[static_cast<size_t>(plan_->inputs()->Get(static_cast<uint32_t>(i)))].to_tensor();
  }
  EValue& output(size_t i) { return slots_[static_cast<size_t>(plan_->outputs()->Get(static_cast<uint32_t>(i)))]; }

  // Runs every KernelCall in order; reports the first failure.
  Status run() {
    for (const auto* chain : *plan_->chains()) {
      for (const auto* instruction : *chain->instructions()) {
        const auto* call = instruction->instr_args_as_KernelCall();
        if (!call) return make_error(ErrorCode::kInternal, "only KernelCall instructions are supported here");
        const std::string key = operator_key(*plan_->operators()->Get(static_cast<uint32_t>(call->op_index())));
        const KernelDescriptor* kernel = kernel_registry().find(key);
        if (!kernel) return make_error(ErrorCode::kUnsupportedOperator, key);
        std::vector<EValue*> args;
        for (int32_t index : *call->args()) args.push_back(&slots_[static_cast<size_t>(index)]);
        ETNA_TRY(check_arity(*kernel, args.size()));
        ETNA_TRY(kernel->fn(KernelArgs{args.data(), args.size(), kernel}));
      }
    }
    return Status::ok();
  }

 private:
  Status make_tensor(const Program& program, const fb::Tensor& source, EValue& slot) {
    auto owned = std::make_unique<OwnedTensor>();
    std::vector<int64_t> sizes(source.sizes()->begin(), source.sizes()->end());
    owned->tensor.init(static_cast<ScalarType>(source.scalar_type()), sizes.size(), sizes.data(),
                       source.dim_order()->data(), static_cast<ShapeDynamism>(source.shape_dynamism()));
    const size_t nbytes = owned->tensor.nbytes();
    owned->words.assign(nbytes / 8 + 2, 0);
    owned->tensor.set_data(owned->words.data(), nbytes);
    const bool external =
        source.extra_tensor_info() && source.extra_tensor_info()->location() == fb::TensorDataLocation::EXTERNAL;
    if (source.data_buffer_idx() > 0 && !external) {
      auto bytes = source.allocation_info() ? program.mutable_initial_data(source.data_buffer_idx(), nbytes)
                                            : program.constant_data(source.data_buffer_idx(), nbytes);
      if (!bytes) return bytes.error();
      std::memcpy(owned->words.data(), bytes->data, nbytes);
    }
    slot = EValue::from_tensor(&owned->tensor);
    tensors_.push_back(std::move(owned));
    return Status::ok();
  }

  struct OwnedTensor {
    std::vector<uint64_t> words;
    Tensor tensor;
  };
  const fb::ExecutionPlan* plan_ = nullptr;
  std::vector<EValue> slots_;
  std::deque<std::vector<EValue*>> lists_;
  std::vector<std::unique_ptr<OwnedTensor>> tensors_;
};

template <typename T>
void set_values(Tensor& t, const std::vector<T>& values) {
  ASSERT_EQ(values.size(), t.numel());
  std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
}

TEST(KernelPrograms, AddAndMulPrograms) {
  {
    REQUIRE_PROGRAM(program, "et_add.pte");
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<float>(method.input(0), {2.5f});
    set_values<float>(method.input(1), {-1.0f});
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{1.5f}));
  }
  {
    REQUIRE_PROGRAM(program, "nodeet_mul.pte");
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<float>(method.input(0), {1, 2, 3, 4, 5, 6});
    set_values<float>(method.input(1), {2, 2, 2, -1, -1, 0.5f});
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{2, 4, 6, -4, -5, 3}));
  }
}

TEST(KernelPrograms, ConstantsFromBothStorageKinds) {
  {
    // constant_segment holding a rank-0 1.0: x + 1 (broadcast).
    REQUIRE_PROGRAM(program, "et_arduino_add_model.pte");
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<float>(method.input(0), {1, 2, 3});
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{2, 3, 4}));
  }
  {
    // Inline constant_buffer: 3 * x + 2.
    REQUIRE_PROGRAM(program, "et_ModuleLinear-no-constant-segment.pte");
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<float>(method.input(0), {1, 2, 3, 4});
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{5, 8, 11, 14}));
  }
}

TEST(KernelPrograms, MeanEqWhereProgram) {
  REQUIRE_PROGRAM(program, "et_model_constant_buffer.pte");
  for (const auto& [x, expected] : std::vector<std::pair<std::vector<float>, float>>{{{1, 2}, 1.5f}, {{-3, 3}, 1.1f}}) {
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<float>(method.input(0), x);
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{expected}));
  }
}

TEST(KernelPrograms, MixedDtypesAndDimOrderCopy) {
  {
    REQUIRE_PROGRAM(program, "npr_dtypes.pte");
    KernelOnlyMethod method;
    ASSERT_TRUE(is_ok(method.load(program, "forward")));
    set_values<int64_t>(method.input(0), {21});
    set_values<float>(method.input(1), {0.25f});
    ASSERT_TRUE(is_ok(method.run()));
    EXPECT_EQ(values_of<int64_t>(method.output(0).to_tensor()), (std::vector<int64_t>{42}));
    EXPECT_EQ(values_of<float>(method.output(1).to_tensor()), (std::vector<float>{0.5f}));
  }
  {
    REQUIRE_PROGRAM(program, "npr_multi_method.pte");
    for (const char* name : {"forward", "double"}) {
      KernelOnlyMethod method;
      ASSERT_TRUE(is_ok(method.load(program, name)));
      set_values<float>(method.input(0), {1.5f, -4.0f});
      ASSERT_TRUE(is_ok(method.run())) << name;
      EXPECT_EQ(values_of<float>(method.output(0).to_tensor()), (std::vector<float>{2.5f, -3.0f})) << name;
    }
  }
}

TEST(KernelPrograms, SoftmaxProgram) {
  REQUIRE_PROGRAM(program, "et_softmax_pr17248.pte");
  KernelOnlyMethod method;
  ASSERT_TRUE(is_ok(method.load(program, "forward")));
  Lcg rng(41);
  const auto x = rng.floats(2 * 4096, -3, 3);
  set_values<float>(method.input(0), x);
  ASSERT_TRUE(is_ok(method.run()));
  const auto got = values_of<float>(method.output(0).to_tensor());
  for (size_t row = 0; row < 2; ++row) {
    double total = 0;
    for (size_t j = 0; j < 4096; ++j) total += std::exp(static_cast<double>(x[row * 4096 + j]));
    for (size_t j = 0; j < 4096; j += 511) {
      EXPECT_NEAR(got[row * 4096 + j], std::exp(static_cast<double>(x[row * 4096 + j])) / total, 1e-7);
    }
  }
}

TEST(KernelPrograms, XorTrainingStepWithZeroParameters) {
  // With all parameters zero the logits are equal, so the cross-entropy loss
  // is ln 2 whatever the input and target. The step runs 66 KernelCalls over
  // 23 operators (addmm, log_softmax, gather, scatter, argmax, ...).
  REQUIRE_PROGRAM(program, "et_xor_training.pte");
  KernelOnlyMethod method;
  ASSERT_TRUE(is_ok(method.load(program, "forward")));
  set_values<float>(method.input(0), {1, 0});
  set_values<int64_t>(method.input(1), {1});
  ASSERT_TRUE(is_ok(method.run()));
  const Tensor& loss = method.output(0).to_tensor();
  EXPECT_EQ(loss.rank(), 0u);
  EXPECT_NEAR(values_of<float>(loss)[0], std::log(2.0), 1e-6);
  // Output 1 is the prediction (argmax of equal logits: class 0).
  EXPECT_EQ(values_of<int64_t>(method.output(1).to_tensor()), (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace etna::kernel_test
