#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, stride, pad, dilation, groups;
  bool bias;
};

// Direct definition: out[n][o][y][x] = b[o] + sum over the group's input
// channels and the kernel window of input * weight.
std::vector<double> reference_conv(const ConvCase& k, const std::vector<float>& in, const std::vector<float>& wt,
                                   const std::vector<float>& b, int64_t oh, int64_t ow) {
  std::vector<double> out(static_cast<size_t>(k.n * k.o * oh * ow));
  const int64_t cg = k.c / k.groups, og = k.o / k.groups;
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double sum = k.bias ? b[o] : 0.0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t i = 0; i < k.kh; ++i)
              for (int64_t j = 0; j < k.kw; ++j) {
                const int64_t iy = y * k.stride - k.pad + i * k.dilation;
                const int64_t ix = x * k.stride - k.pad + j * k.dilation;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
                const int64_t c = (o / og) * cg + ci;
                sum += static_cast<double>(in[((n * k.c + c) * k.h + iy) * k.w + ix]) *
                       wt[((o * cg + ci) * k.kh + i) * k.kw + j];
              }
          out[((n * k.o + o) * oh + y) * ow + x] = sum;
        }
  return out;
}

TEST(KernelConvolution, Conv2dMatchesDirectDefinition) {
  const std::vector<ConvCase> cases = {
      {1, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, true},   // same padding
      {2, 4, 7, 5, 6, 3, 2, 2, 0, 1, 2, false},  // stride, groups, no bias
      {1, 2, 9, 9, 2, 3, 3, 1, 2, 2, 2, true},   // dilation, depthwise
  };
  Lcg rng(31);
  for (const ConvCase& k : cases) {
    const int64_t oh = (k.h + 2 * k.pad - k.dilation * (k.kh - 1) - 1) / k.stride + 1;
    const int64_t ow = (k.w + 2 * k.pad - k.dilation * (k.kw - 1) - 1) / k.stride + 1;
    TensorStore store;
    const auto in = rng.floats(static_cast<size_t>(k.n * k.c * k.h * k.w));
    const auto wt = rng.floats(static_cast<size_t>(k.o * (k.c / k.groups) * k.kh * k.kw));
    const auto b = rng.floats(static_cast<size_t>(k.o));
    Tensor& input = store.make<float>({k.n, k.c, k.h, k.w}, in);
    Tensor& weight = store.make<float>({k.o, k.c / k.groups, k.kh, k.kw}, wt);
    Tensor& bias = store.make<float>({k.o}, b);
    Tensor& out = store.make_empty(ScalarType::kFloat, {k.n, k.o, oh, ow});
    Args args;
    args.tensor(input).tensor(weight).optional_tensor(k.bias ? &bias : nullptr);
    args.ints({k.stride, k.stride}).ints({k.pad, k.pad}).ints({k.dilation, k.dilation}).boolean(false).ints({0, 0});
    args.integer(k.groups).tensor(out).same_as(9);
    ASSERT_TRUE(is_ok(run_kernel("aten::convolution.out", args)));
    const auto expected = reference_conv(k, in, wt, b, oh, ow);
    const auto got = values_of<float>(out);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
  }
}

TEST(KernelConvolution, Conv1dAndErrors) {
  TensorStore store;
  Tensor& input = store.make<float>({1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor& weight = store.make<float>({1, 1, 2}, {1, -1});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 4});
  Args args;
  args.tensor(input).tensor(weight).none().ints({1}).ints({0}).ints({1}).boolean(false).ints({0});
  args.integer(1).tensor(out).same_as(9);
  ASSERT_TRUE(is_ok(run_kernel("aten::convolution.out", args)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{-1, -1, -1, -1}));

  Args transposed;
  transposed.tensor(input).tensor(weight).none().ints({1}).ints({0}).ints({1}).boolean(true).ints({0});
  transposed.integer(1).tensor(out).same_as(9);
  EXPECT_TRUE(fails_with(run_kernel("aten::convolution.out", transposed), {"aten::convolution.out", "transposed"}));

  Args groups;
  groups.tensor(input).tensor(weight).none().ints({1}).ints({0}).ints({1}).boolean(false).ints({0});
  groups.integer(2).tensor(out).same_as(9);
  EXPECT_TRUE(fails_with(run_kernel("aten::convolution.out", groups), {"groups 2"}));

  Tensor& big = store.make<float>({1, 1, 7}, {1, 1, 1, 1, 1, 1, 1});
  Args too_big;
  too_big.tensor(input).tensor(big).none().ints({1}).ints({0}).ints({1}).boolean(false).ints({0});
  too_big.integer(1).tensor(out).same_as(9);
  EXPECT_TRUE(fails_with(run_kernel("aten::convolution.out", too_big), {"larger than the padded input"}));
}

}  // namespace
}  // namespace etna::kernel_test
