// The registry against real programs: every KernelCall in the test .pte
// files resolves to a kernel whose arity matches the call's argument count.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/program.h"
#include "fixtures.h"
#include "kernel_test_support.h"
#include "kernels/registry.h"

namespace etna::kernel_test {
namespace {

using ::etna::test::testdata_dir;

TEST(KernelRegistry, EveryOperatorInTheTestProgramsIsRegisteredWithItsArity) {
  ETNA_REQUIRE_TESTDATA();
  std::set<std::string> seen;
  size_t calls = 0;
  for (const auto& entry : std::filesystem::directory_iterator(testdata_dir())) {
    if (entry.path().extension() != ".pte" || entry.path().filename() == "djl_corrupt.pte") continue;
    auto program = Program::load_file(entry.path().string());
    ASSERT_TRUE(program) << entry.path() << ": " << program.error().message;
    for (size_t m = 0; m < (*program)->method_count(); ++m) {
      const fb::ExecutionPlan& plan = (*program)->method(m);
      if (!plan.chains()) continue;
      for (const auto* chain : *plan.chains()) {
        if (!chain->instructions()) continue;
        for (const auto* instruction : *chain->instructions()) {
          const auto* call = instruction->instr_args_as_KernelCall();
          if (!call) continue;
          ++calls;
          const std::string key = operator_key(*plan.operators()->Get(static_cast<uint32_t>(call->op_index())));
          seen.insert(key);
          const KernelDescriptor* kernel = kernel_registry().find(key);
          ASSERT_NE(kernel, nullptr) << key << " used by " << entry.path().filename() << " is not registered";
          const size_t arg_count = call->args() ? call->args()->size() : 0;
          EXPECT_EQ(static_cast<size_t>(kernel->arity), arg_count)
              << key << " in " << entry.path().filename() << " has " << arg_count << " arguments";
        }
      }
    }
  }
  // The README lists 28 distinct operators across the files.
  EXPECT_GE(calls, 70u);
  EXPECT_EQ(seen.size(), 28u);
}

TEST(KernelRegistry, RegistersEveryDocumentedKey) {
  const std::vector<std::string> keys = {"aten::add.out",
                                         "aten::add.Scalar_out",
                                         "aten::sub.out",
                                         "aten::sub.Scalar_out",
                                         "aten::mul.out",
                                         "aten::mul.Scalar_out",
                                         "aten::div.out",
                                         "aten::div.Scalar_out",
                                         "aten::div.out_mode",
                                         "aten::rsub.Scalar_out",
                                         "aten::bmm.out",
                                         "aten::mm.out",
                                         "aten::addmm.out",
                                         "aten::linear.out",
                                         "aten::relu.out",
                                         "aten::tanh.out",
                                         "aten::gelu.out",
                                         "aten::silu.out",
                                         "aten::sigmoid.out",
                                         "aten::mean.out",
                                         "aten::mean.dtype_out",
                                         "aten::sum.IntList_out",
                                         "aten::native_layer_norm.out",
                                         "aten::_softmax.out",
                                         "aten::_log_softmax.out",
                                         "aten::permute_copy.out",
                                         "aten::view_copy.out",
                                         "aten::transpose_copy.int_out",
                                         "aten::unsqueeze_copy.out",
                                         "aten::squeeze_copy.dims_out",
                                         "aten::squeeze_copy.dim_out",
                                         "aten::expand_copy.out",
                                         "aten::cat.out",
                                         "aten::slice_copy.Tensor_out",
                                         "aten::select_copy.int_out",
                                         "aten::index_select.out",
                                         "aten::embedding.out",
                                         "aten::index_put.out",
                                         "aten::index_put_",
                                         "aten::copy_",
                                         "aten::copy.out",
                                         "aten::full.out",
                                         "aten::zeros.out",
                                         "aten::full_like.out",
                                         "aten::scalar_tensor.out",
                                         "aten::eq.Scalar_out",
                                         "aten::ne.Scalar_out",
                                         "aten::lt.Scalar_out",
                                         "aten::gt.Scalar_out",
                                         "aten::le.Scalar_out",
                                         "aten::ge.Scalar_out",
                                         "aten::eq.Tensor_out",
                                         "aten::ne.Tensor_out",
                                         "aten::lt.Tensor_out",
                                         "aten::gt.Tensor_out",
                                         "aten::le.Tensor_out",
                                         "aten::ge.Tensor_out",
                                         "aten::where.self_out",
                                         "aten::gather.out",
                                         "aten::scatter.value_out",
                                         "aten::clone.out",
                                         "aten::alias_copy.out",
                                         "dim_order_ops::_clone_dim_order.out",
                                         "dim_order_ops::_to_dim_order_copy.out",
                                         "aten::sqrt.out",
                                         "aten::rsqrt.out",
                                         "aten::log.out",
                                         "aten::exp.out",
                                         "aten::neg.out",
                                         "aten::pow.Tensor_Scalar_out",
                                         "aten::sin.out",
                                         "aten::cos.out",
                                         "aten::hardtanh.out",
                                         "aten::clamp.out",
                                         "aten::masked_fill.Scalar_out",
                                         "aten::logical_not.out",
                                         "aten::amax.out",
                                         "aten::argmax.out",
                                         "aten::cumsum.out",
                                         "aten::constant_pad_nd.out",
                                         "aten::split_with_sizes_copy.out",
                                         "aten::stack.out",
                                         "aten::arange.start_out",
                                         "executorch_prim::et_view.default",
                                         "aten::sym_size.int",
                                         "aten::sym_numel",
                                         "executorch_prim::add.Scalar",
                                         "executorch_prim::sub.Scalar",
                                         "executorch_prim::mul.Scalar",
                                         "executorch_prim::floordiv.Scalar",
                                         "executorch_prim::truediv.Scalar",
                                         "executorch_prim::eq.Scalar",
                                         "executorch_prim::gt.Scalar",
                                         "executorch_prim::lt.Scalar",
                                         "executorch_prim::ge.Scalar",
                                         "executorch_prim::le.Scalar",
                                         "executorch_prim::neg.Scalar"};
  for (const std::string& key : keys) {
    const KernelDescriptor* entry = kernel_registry().find(key);
    ASSERT_NE(entry, nullptr) << key;
    EXPECT_EQ(entry->name, key);
    EXPECT_NE(entry->fn, nullptr) << key;
    EXPECT_GT(entry->arity, 0) << key;
  }
}

// A call of another argument count is refused before the kernel runs, with
// the operator's name; variadic kernels count their arguments themselves.
TEST(KernelRegistry, CheckArityNamesTheOperatorAndAcceptsVariadicKernels) {
  const KernelDescriptor* add = kernel_registry().find("aten::add.out");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(check_arity(*add, 5).is_ok());
  const Status wrong = check_arity(*add, 4);
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kInvalidProgram);
  EXPECT_NE(wrong.error().message.find("aten::add.out takes 5 arguments"), std::string::npos) << wrong.error().message;
  const KernelDescriptor* dequantize = kernel_registry().find("quantized_decomposed::dequantize_per_tensor.out");
  ASSERT_NE(dequantize, nullptr);
  EXPECT_EQ(dequantize->arity, -1);
  EXPECT_TRUE(check_arity(*dequantize, 3).is_ok());
}

// The test main registered the portable kernels once; registering again (as
// every worker's addon init does) adds nothing, and the same kernels fill a
// registry of the caller's own.
TEST(KernelRegistry, RegisteringAgainAddsNothingAndALocalRegistryGetsTheSameKernels) {
  const size_t registered = kernel_registry().keys().size();
  ASSERT_GT(registered, 0u);
  kernels::register_portable_kernels();
  EXPECT_EQ(kernel_registry().keys().size(), registered);

  KernelRegistry local;
  EXPECT_EQ(local.find("aten::add.out"), nullptr);
  kernels::add_portable_kernels(local);
  EXPECT_EQ(local.keys().size(), registered);
  const KernelDescriptor* add = local.find("aten::add.out");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->fn, kernel_registry().find("aten::add.out")->fn);
}

// Slots a call passes for a schema: its arguments (outs included, the `*`
// marker not) plus one return slot.
size_t slots_for_schema(std::string_view schema) {
  const size_t open = schema.find('(');
  const size_t close = schema.rfind(')');
  size_t arguments = 0;
  int depth = 0;
  bool in_argument = false;
  for (size_t i = open + 1; i < close; ++i) {
    const char ch = schema[i];
    if (ch == '[' || ch == '(') ++depth;
    if (ch == ']' || ch == ')') --depth;
    if (ch == ',' && depth == 0) {
      in_argument = false;
    } else if (ch != ' ' && ch != '*' && !in_argument) {
      in_argument = true;
      ++arguments;
    }
  }
  return arguments + 1;
}

TEST(KernelRegistry, PortableOperatorsTakeTheirSchemaArgumentsAndAReturnSlot) {
  // Schemas as ATen and ExecuTorch declare them.
  const char* schemas[] = {
      "aten::max_pool2d_with_indices.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
      "int[2] dilation=1, bool ceil_mode=False, *, Tensor(a!) out, Tensor(b!) indices)",
      "aten::avg_pool2d.out(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool "
      "ceil_mode=False, bool count_include_pad=True, int? divisor_override=None, *, Tensor(a!) out)",
      "aten::_adaptive_avg_pool2d.out(Tensor self, SymInt[2] output_size, *, Tensor(a!) out)",
      "aten::_native_batch_norm_legit_no_training.out(Tensor input, Tensor? weight, Tensor? bias, Tensor "
      "running_mean, Tensor running_var, float momentum, float eps, *, Tensor(a!) out0, Tensor(b!) out1, "
      "Tensor(c!) out2)",
      "aten::upsample_nearest2d.vec_out(Tensor input, SymInt[]? output_size, float[]? scale_factors, *, Tensor(a!) "
      "out)",
      "aten::upsample_bilinear2d.vec_out(Tensor input, SymInt[]? output_size, bool align_corners, float[]? "
      "scale_factors, *, Tensor(a!) out)",
      "aten::any.out(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) out)",
      "aten::any.dims_out(Tensor self, int[]? dim=None, bool keepdim=False, *, Tensor(a!) out)",
      "aten::any.all_out(Tensor self, *, Tensor(a!) out)",
      "aten::logical_and.out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::logical_or.out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::logical_xor.out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::bitwise_and.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::bitwise_and.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)",
      "aten::bitwise_or.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::bitwise_or.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)",
      "aten::bitwise_xor.Tensor_out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::bitwise_xor.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)",
      "aten::bitwise_not.out(Tensor self, *, Tensor(a!) out)",
      "aten::maximum.out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::minimum.out(Tensor self, Tensor other, *, Tensor(a!) out)",
      "aten::max.dim_max(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) max, Tensor(b!) max_values)",
      "aten::min.dim_min(Tensor self, int dim, bool keepdim=False, *, Tensor(a!) min, Tensor(b!) min_indices)",
      "aten::topk.values(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True, *, Tensor(a!) "
      "values, Tensor(b!) indices)",
      "aten::tril.out(Tensor self, int diagonal=0, *, Tensor(a!) out)",
      "aten::triu.out(Tensor self, int diagonal=0, *, Tensor(a!) out)",
      "aten::repeat.out(Tensor self, SymInt[] repeats, *, Tensor(a!) out)",
      "aten::unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out)",
      "aten::native_group_norm.out(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int "
      "group, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)",
      "aten::var_mean.correction_out(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool "
      "keepdim=False, Tensor(a!) out0, Tensor(b!) out1)",
      "dim_order_ops::_empty_dim_order.out(int[] size, *, int[]? dim_order=None, Tensor(a!) out)",
  };
  for (std::string_view schema : schemas) {
    const std::string key(schema.substr(0, schema.find('(')));
    const KernelDescriptor* entry = kernel_registry().find(key);
    ASSERT_NE(entry, nullptr) << key;
    EXPECT_EQ(entry->arity, static_cast<int>(slots_for_schema(schema))) << key;
  }
  // The emitter writes et_copy_index(copy_to, copy_from, index) without a return slot.
  const KernelDescriptor* copy_index = kernel_registry().find("executorch_prim::et_copy_index.tensor");
  ASSERT_NE(copy_index, nullptr);
  EXPECT_EQ(copy_index->arity, 3);
}

}  // namespace
}  // namespace etna::kernel_test
