// The registry against real programs: every KernelCall in the test .pte
// files resolves to a kernel whose arity matches the call's argument count.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/program.h"
#include "kernel_test_support.h"
#include "kernels/registry.h"

namespace etna::kernel_test {
namespace {

std::string testdata_dir() {
  if (const char* dir = std::getenv("ETNA_TESTDATA")) return dir;
  return ETNA_TESTDATA_DIR;
}

bool have_testdata() { return std::filesystem::exists(testdata_dir() + "/et_add.pte"); }

TEST(KernelRegistry, EveryOperatorInTheTestProgramsIsRegisteredWithItsArity) {
  if (!have_testdata()) GTEST_SKIP() << "no testdata at " << testdata_dir();
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
          const KernelEntry* kernel = kernel_registry().find(key);
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
  const std::vector<std::string> keys = {
      "aten::add.out", "aten::add.Scalar_out", "aten::sub.out", "aten::sub.Scalar_out", "aten::mul.out",
      "aten::mul.Scalar_out", "aten::div.out", "aten::div.Scalar_out", "aten::div.out_mode", "aten::rsub.Scalar_out",
      "aten::bmm.out", "aten::mm.out", "aten::addmm.out", "aten::linear.out", "aten::relu.out", "aten::tanh.out",
      "aten::gelu.out", "aten::silu.out", "aten::sigmoid.out", "aten::mean.out", "aten::mean.dtype_out",
      "aten::sum.IntList_out", "aten::native_layer_norm.out", "aten::_softmax.out", "aten::_log_softmax.out",
      "aten::permute_copy.out", "aten::view_copy.out", "aten::transpose_copy.int_out", "aten::unsqueeze_copy.out",
      "aten::squeeze_copy.dims_out", "aten::squeeze_copy.dim_out", "aten::expand_copy.out", "aten::cat.out",
      "aten::slice_copy.Tensor_out", "aten::select_copy.int_out", "aten::index_select.out", "aten::embedding.out",
      "aten::index_put.out", "aten::index_put_", "aten::copy_", "aten::copy.out", "aten::full.out", "aten::zeros.out",
      "aten::full_like.out", "aten::scalar_tensor.out", "aten::eq.Scalar_out", "aten::ne.Scalar_out",
      "aten::lt.Scalar_out", "aten::gt.Scalar_out", "aten::le.Scalar_out", "aten::ge.Scalar_out",
      "aten::eq.Tensor_out", "aten::ne.Tensor_out", "aten::lt.Tensor_out", "aten::gt.Tensor_out",
      "aten::le.Tensor_out", "aten::ge.Tensor_out", "aten::where.self_out", "aten::gather.out",
      "aten::scatter.value_out", "aten::clone.out", "aten::alias_copy.out", "dim_order_ops::_clone_dim_order.out",
      "dim_order_ops::_to_dim_order_copy.out", "aten::sqrt.out", "aten::rsqrt.out", "aten::log.out", "aten::exp.out",
      "aten::neg.out", "aten::pow.Tensor_Scalar_out", "aten::sin.out", "aten::cos.out", "aten::hardtanh.out",
      "aten::clamp.out", "aten::masked_fill.Scalar_out", "aten::logical_not.out", "aten::amax.out",
      "aten::argmax.out", "aten::cumsum.out", "aten::constant_pad_nd.out", "aten::split_with_sizes_copy.out",
      "aten::stack.out", "aten::arange.start_out", "executorch_prim::et_view.default", "aten::sym_size.int",
      "aten::sym_numel", "executorch_prim::add.Scalar", "executorch_prim::sub.Scalar", "executorch_prim::mul.Scalar",
      "executorch_prim::floordiv.Scalar", "executorch_prim::truediv.Scalar", "executorch_prim::eq.Scalar",
      "executorch_prim::gt.Scalar", "executorch_prim::lt.Scalar", "executorch_prim::ge.Scalar",
      "executorch_prim::le.Scalar", "executorch_prim::neg.Scalar"};
  for (const std::string& key : keys) {
    const KernelEntry* entry = kernel_registry().find(key);
    ASSERT_NE(entry, nullptr) << key;
    EXPECT_NE(entry->fn, nullptr) << key;
    EXPECT_GT(entry->arity, 0) << key;
  }
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
  const KernelEntry* add = local.find("aten::add.out");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->fn, kernel_registry().find("aten::add.out")->fn);
}

}  // namespace
}  // namespace etna::kernel_test
