#include <cmath>
#include <limits>

#include "kernel_test_support.h"

namespace etna::kernel_test {
namespace {

// --- max_pool2d_with_indices ---------------------------------------------------------

struct MaxPoolCall {
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

Status run_max_pool(Tensor& self, const MaxPoolCall& c, Tensor& out, Tensor& indices) {
  Args args;
  args.tensor(self).ints(c.kernel).ints(c.stride).ints(c.padding).ints(c.dilation).boolean(c.ceil_mode);
  args.outs({&out, &indices});
  return run_kernel("aten::max_pool2d_with_indices.out", args);
}

TEST(KernelPooling, MaxPoolTwoByTwoWindowsGiveMaximaAndPlaneIndices) {
  TensorStore store;
  // [1, 1, 4, 4] with a distinct maximum per 2x2 block.
  Tensor& self = store.make<float>({1, 1, 4, 4}, {1, 9, 2, 3,    //
                                                  4, 5, 8, 6,    //
                                                  7, 0, -1, -2,  //
                                                  3, 2, -5, -3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 2, 2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {1, 1, 2, 2});
  ASSERT_TRUE(is_ok(run_max_pool(self, {{2}, {}, {0}, {1}}, out, indices)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{9, 8, 7, -1}));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{1, 6, 8, 10}));
}

// The max over the in-bounds window positions (padding never wins), with the
// first index of ties; a formula-level reference for any window.
void reference_max_pool(const std::vector<float>& in, int64_t planes, int64_t h, int64_t w, const MaxPoolCall& c,
                        int64_t out_h, int64_t out_w, std::vector<float>& values, std::vector<int64_t>& idx) {
  const int64_t kh = c.kernel[0], kw = c.kernel.back();
  const int64_t sh = c.stride.empty() ? kh : c.stride[0], sw = c.stride.empty() ? kw : c.stride.back();
  const int64_t ph = c.padding[0], pw = c.padding.back(), dh = c.dilation[0], dw = c.dilation.back();
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t oy = 0; oy < out_h; ++oy) {
      for (int64_t ox = 0; ox < out_w; ++ox) {
        float best = -std::numeric_limits<float>::infinity();
        int64_t best_index = -1;
        for (int64_t a = 0; a < kh; ++a) {
          for (int64_t b = 0; b < kw; ++b) {
            const int64_t y = oy * sh - ph + a * dh, x = ox * sw - pw + b * dw;
            if (y < 0 || y >= h || x < 0 || x >= w) continue;
            const float v = in[static_cast<size_t>((p * h + y) * w + x)];
            if (best_index < 0 || v > best) {
              best = v;
              best_index = y * w + x;
            }
          }
        }
        values.push_back(best);
        idx.push_back(best_index);
      }
    }
  }
}

TEST(KernelPooling, MaxPoolWithPaddingStrideDilationAndCeilModeMatchesTheWindowFormula) {
  Lcg rng(11);
  struct Case {
    MaxPoolCall call;
    int64_t h, w, out_h, out_w;
  };
  const std::vector<Case> cases = {
      // out = floor((in + 2p - d(k-1) - 1) / s) + 1
      {{{3}, {2}, {1}, {1}, false}, 5, 6, 3, 3},
      // ceil_mode adds a window hanging over the end: ceil((7 - 2) / 2) + 1 = 4
      {{{2}, {2}, {0}, {1}, true}, 7, 7, 4, 4},
      // ... unless it would start in the right padding: in 3, k 2, s 2, p 1 -> 2, not 3
      {{{2}, {2}, {1}, {1}, true}, 3, 3, 2, 2},
      // dilation 2 and separate height/width parameters
      {{{3, 2}, {1, 2}, {1, 0}, {2, 1}, false}, 6, 5, 4, 2},
      // an empty stride means stride = kernel_size
      {{{2, 3}, {}, {0, 1}, {1}, false}, 4, 6, 2, 2},
  };
  for (const Case& k : cases) {
    TensorStore store;
    const auto values = rng.floats(static_cast<size_t>(2 * 3 * k.h * k.w));
    Tensor& self = store.make<float>({2, 3, k.h, k.w}, values);
    Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, k.out_h, k.out_w});
    Tensor& indices = store.make_empty(ScalarType::kLong, {2, 3, k.out_h, k.out_w});
    ASSERT_TRUE(is_ok(run_max_pool(self, k.call, out, indices))) << k.h << "x" << k.w;
    std::vector<float> expected;
    std::vector<int64_t> expected_indices;
    reference_max_pool(values, 6, k.h, k.w, k.call, k.out_h, k.out_w, expected, expected_indices);
    EXPECT_EQ(values_of<float>(out), expected);
    EXPECT_EQ(values_of<int64_t>(indices), expected_indices);
  }
}

TEST(KernelPooling, MaxPoolTiesKeepTheFirstIndexAndThreeDimInputsWork) {
  TensorStore store;
  // [C=1, 3, 3] of equal values: every window reports its first in-bounds
  // element (padding 1 moves the first window's start to (0, 0)).
  Tensor& self = store.make<int32_t>({1, 3, 3}, std::vector<int32_t>(9, 4));
  Tensor& out = store.make_empty(ScalarType::kInt, {1, 2, 2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {1, 2, 2});
  ASSERT_TRUE(is_ok(run_max_pool(self, {{3}, {2}, {1}, {1}}, out, indices)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(values_of<int32_t>(out), (std::vector<int32_t>{4, 4, 4, 4}));
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{0, 1, 3, 4}));
}

TEST(KernelPooling, MaxPoolNaNOnlyWinsAsTheFirstElementOfAWindow) {
  // ExecuTorch compares with `>`: a NaN that starts a window stays, a later
  // one never replaces a number.
  TensorStore store;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor& self = store.make<float>({1, 1, 2, 4}, {nan, 1, 2, nan,  //
                                                  0, 5, -1, 3});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 1, 2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {1, 1, 1, 2});
  ASSERT_TRUE(is_ok(run_max_pool(self, {{2}, {2}, {0}, {1}}, out, indices)));
  const auto got = values_of<float>(out);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 3);
  EXPECT_EQ(values_of<int64_t>(indices), (std::vector<int64_t>{0, 7}));
}

TEST(KernelPooling, MaxPoolAcceptsAnEmptyBatch) {
  TensorStore store;
  Tensor& self = store.make<float>({0, 2, 4, 4}, {});
  Tensor& out = store.make_empty(ScalarType::kFloat, {0, 2, 2, 2});
  Tensor& indices = store.make_empty(ScalarType::kLong, {0, 2, 2, 2});
  ASSERT_TRUE(is_ok(run_max_pool(self, {{2}, {2}, {0}, {1}}, out, indices)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{0, 2, 2, 2}));
}

TEST(KernelPooling, MaxPoolRejectsBadWindowsAndDtypes) {
  TensorStore store;
  Tensor& self = store.make<float>({1, 1, 4, 4}, iota_floats(16, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 4, 4}, bounded());
  Tensor& indices = store.make_empty(ScalarType::kLong, {1, 1, 4, 4}, bounded());
  const std::string key = "aten::max_pool2d_with_indices.out";
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2}, {2}, {2}, {1}}, out, indices), {key, "padding", "half"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{5}, {1}, {0}, {1}}, out, indices), {key, "larger than"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{3}, {1}, {1}, {3}}, out, indices), {key, "larger than"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{0}, {1}, {0}, {1}}, out, indices), {key, "kernel_size"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2}, {0}, {0}, {1}}, out, indices), {key, "stride"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2}, {1}, {0}, {0}}, out, indices), {key, "dilation"}));
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2, 2, 2}, {1}, {0}, {1}}, out, indices), {key, "kernel_size", "3"}));
  Tensor& int_indices = store.make_empty(ScalarType::kInt, {1, 1, 4, 4}, bounded());
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2}, {1}, {0}, {1}}, out, int_indices), {key, "indices", "int64"}));
  Tensor& flat = store.make<float>({4, 4}, iota_floats(16, 1.0f));
  EXPECT_TRUE(fails_with(run_max_pool(flat, {{2}, {1}, {0}, {1}}, out, indices), {key, "[N, C, H, W]"}));
  Tensor& bools = store.make<bool>({1, 1, 2, 2}, {true, false, true, false});
  Tensor& bool_out = store.make_empty(ScalarType::kBool, {1, 1, 1, 1});
  EXPECT_TRUE(fails_with(run_max_pool(bools, {{2}, {1}, {0}, {1}}, bool_out, indices), {key, "bool"}));
  // A static out of the wrong shape is refused without writing.
  Tensor& small = store.make_empty(ScalarType::kFloat, {1, 1, 1, 1});
  EXPECT_TRUE(fails_with(run_max_pool(self, {{2}, {2}, {0}, {1}}, small, indices), {key, "out"}));
}

// --- avg_pool2d -------------------------------------------------------------------------

Status run_avg_pool(Tensor& self, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                    std::vector<int64_t> padding, bool ceil_mode, bool count_include_pad,
                    std::optional<int64_t> divisor, Tensor& out) {
  Args args;
  args.tensor(self).ints(kernel).ints(stride).ints(padding).boolean(ceil_mode).boolean(count_include_pad);
  if (divisor) args.integer(*divisor);
  else args.none();
  args.tensor(out).same_as(7);
  return run_kernel("aten::avg_pool2d.out", args);
}

TEST(KernelPooling, AvgPoolCountsPaddingOnlyWhenAskedAndHonoursDivisorOverride) {
  TensorStore store;
  // 1..9 in a 3x3 plane; kernel 3, stride 1, padding 1 -> 3x3 output.
  Tensor& self = store.make<float>({1, 1, 3, 3}, iota_floats(9, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 3, 3});
  ASSERT_TRUE(is_ok(run_avg_pool(self, {3}, {1}, {1}, false, true, std::nullopt, out)));
  // Corner (0, 0) covers 1, 2, 4, 5 = 12 of a 9-element padded window.
  auto got = values_of<float>(out);
  EXPECT_FLOAT_EQ(got[0], 12.0f / 9);
  EXPECT_FLOAT_EQ(got[4], 45.0f / 9);
  EXPECT_FLOAT_EQ(got[1], (1 + 2 + 3 + 4 + 5 + 6) / 9.0f);
  ASSERT_TRUE(is_ok(run_avg_pool(self, {3}, {1}, {1}, false, false, std::nullopt, out)));
  got = values_of<float>(out);
  EXPECT_FLOAT_EQ(got[0], 12.0f / 4);
  EXPECT_FLOAT_EQ(got[1], 21.0f / 6);
  EXPECT_FLOAT_EQ(got[4], 5.0f);
  ASSERT_TRUE(is_ok(run_avg_pool(self, {3}, {1}, {1}, false, true, 2, out)));
  got = values_of<float>(out);
  EXPECT_FLOAT_EQ(got[0], 6.0f);
  EXPECT_FLOAT_EQ(got[4], 22.5f);
}

TEST(KernelPooling, AvgPoolCeilModeOverhangIsNeverCounted) {
  TensorStore store;
  // 3x3, kernel 2, stride 2, ceil_mode: 2x2 output whose last row and column
  // windows hang over the input by one; they average only what exists.
  Tensor& self = store.make<float>({1, 3, 3}, iota_floats(9, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 2, 2}, bounded());
  for (bool include_pad : {true, false}) {
    ASSERT_TRUE(is_ok(run_avg_pool(self, {2}, {2}, {0}, true, include_pad, std::nullopt, out)));
    EXPECT_EQ(values_of<float>(out), (std::vector<float>{3, 4.5f, 7.5f, 9})) << include_pad;
  }
  ASSERT_TRUE(is_ok(run_avg_pool(self, {2}, {2}, {0}, false, true, std::nullopt, out)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{1, 1, 1}));
}

TEST(KernelPooling, AvgPoolOfInt64TruncatesTowardZero) {
  TensorStore store;
  Tensor& self = store.make<int64_t>({1, 1, 2, 2}, {-1, -2, -4, -5});
  Tensor& out = store.make_empty(ScalarType::kLong, {1, 1, 3, 3});
  // Window at (0, 0) with padding 1 covers only -1: -1 / 4 with padding counted.
  ASSERT_TRUE(is_ok(run_avg_pool(self, {2}, {1}, {1}, false, true, std::nullopt, out)));
  EXPECT_EQ(shape_of(out), (std::vector<int64_t>{1, 1, 3, 3}));
  auto got = values_of<int64_t>(out);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[4], -3);  // -12 / 4
  ASSERT_TRUE(is_ok(run_avg_pool(self, {2}, {1}, {1}, false, false, std::nullopt, out)));
  got = values_of<int64_t>(out);
  EXPECT_EQ(got[0], -1);
  EXPECT_EQ(got[1], -1);  // (-1 - 2) / 2 truncates to -1
}

TEST(KernelPooling, AvgPoolRejectsZeroDivisorIntegersOtherThanInt64AndMismatchedOut) {
  TensorStore store;
  Tensor& self = store.make<float>({1, 1, 2, 2}, iota_floats(4, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 1, 1});
  const std::string key = "aten::avg_pool2d.out";
  EXPECT_TRUE(fails_with(run_avg_pool(self, {2}, {2}, {0}, false, true, 0, out), {key, "divisor_override"}));
  Tensor& ints = store.make<int32_t>({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor& int_out = store.make_empty(ScalarType::kInt, {1, 1, 1, 1});
  EXPECT_TRUE(fails_with(run_avg_pool(ints, {2}, {2}, {0}, false, true, std::nullopt, int_out), {key, "int32"}));
  Tensor& double_out = store.make_empty(ScalarType::kDouble, {1, 1, 1, 1});
  EXPECT_TRUE(fails_with(run_avg_pool(self, {2}, {2}, {0}, false, true, std::nullopt, double_out), {key, "out"}));
  // float16 is floating but not one of the averaged dtypes: refused, not skipped.
  Tensor& halves = store.make_empty(ScalarType::kHalf, {1, 1, 2, 2});
  Tensor& half_out = store.make_empty(ScalarType::kHalf, {1, 1, 1, 1});
  EXPECT_TRUE(fails_with(run_avg_pool(halves, {2}, {2}, {0}, false, true, std::nullopt, half_out), {key, "float16"}));
  Args short_args;
  short_args.tensor(self).ints({2}).tensor(out).same_as(2);
  EXPECT_FALSE(call_kernel_fn(key, short_args).is_ok());
}

// --- _adaptive_avg_pool2d ---------------------------------------------------------------

Status run_adaptive(Tensor& self, std::vector<int64_t> size, Tensor& out) {
  Args args;
  args.tensor(self).ints(size).tensor(out).same_as(2);
  return run_kernel("aten::_adaptive_avg_pool2d.out", args);
}

TEST(KernelPooling, AdaptiveAvgPoolUsesFloorStartAndCeilEnd) {
  TensorStore store;
  // Width 5 into 3 cells: [0, 2), [1, 4), [3, 5); height 1 into 1.
  Tensor& self = store.make<float>({1, 1, 1, 5}, {1, 2, 3, 4, 10});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 1, 3});
  ASSERT_TRUE(is_ok(run_adaptive(self, {1, 3}, out)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{1.5f, 3, 7}));
  // Growing 2 -> 3 overlaps: [0, 1), [0, 2), [1, 2).
  Tensor& two = store.make<double>({1, 2, 1}, {2, 6});
  Tensor& three = store.make_empty(ScalarType::kDouble, {1, 3, 1});
  ASSERT_TRUE(is_ok(run_adaptive(two, {3, 1}, three)));
  EXPECT_EQ(values_of<double>(three), (std::vector<double>{2, 4, 6}));
}

TEST(KernelPooling, AdaptiveAvgPoolToOneByOneIsTheGlobalMeanPerChannel) {
  TensorStore store;
  Lcg rng(3);
  const auto values = rng.floats(2 * 3 * 4 * 5);
  Tensor& self = store.make<float>({2, 3, 4, 5}, values);
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 1, 1});
  ASSERT_TRUE(is_ok(run_adaptive(self, {1, 1}, out)));
  const auto got = values_of<float>(out);
  for (size_t p = 0; p < 6; ++p) {
    double sum = 0;
    for (size_t i = 0; i < 20; ++i) sum += values[p * 20 + i];
    EXPECT_NEAR(got[p], sum / 20, 1e-6);
  }
}

TEST(KernelPooling, AdaptiveAvgPoolRejectsBadSizes) {
  TensorStore store;
  Tensor& self = store.make<float>({1, 1, 2, 2}, iota_floats(4, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 2, 2}, bounded());
  const std::string key = "aten::_adaptive_avg_pool2d.out";
  EXPECT_TRUE(fails_with(run_adaptive(self, {0, 1}, out), {key, "output_size"}));
  EXPECT_TRUE(fails_with(run_adaptive(self, {1}, out), {key, "output_size"}));
  Tensor& empty_plane = store.make<float>({1, 1, 0, 2}, {});
  EXPECT_TRUE(fails_with(run_adaptive(empty_plane, {1, 1}, out), {key, "non-empty"}));
}

// --- _native_batch_norm_legit_no_training -------------------------------------------------

TEST(KernelPooling, BatchNormUsesRunningStatisticsPerChannel) {
  TensorStore store;
  Lcg rng(8);
  const auto values = rng.floats(2 * 3 * 4);
  Tensor& input = store.make<float>({2, 3, 4}, values);
  const std::vector<float> w = {1.5f, -1, 0.5f}, b = {0.1f, 0.2f, -0.3f}, mean = {0.5f, -0.25f, 0}, var = {1, 4, 0.25f};
  Tensor& weight = store.make<float>({3}, w);
  Tensor& bias = store.make<float>({3}, b);
  Tensor& running_mean = store.make<float>({3}, mean);
  Tensor& running_var = store.make<float>({3}, var);
  Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 4});
  Tensor& mean_out = store.make_empty(ScalarType::kFloat, {0});
  Tensor& invstd_out = store.make_empty(ScalarType::kFloat, {0});
  const double eps = 1e-5;
  for (bool affine : {true, false}) {
    Args args;
    args.tensor(input).optional_tensor(affine ? &weight : nullptr).optional_tensor(affine ? &bias : nullptr);
    args.tensor(running_mean).tensor(running_var).real(0.1).real(eps);
    args.outs({&out, &mean_out, &invstd_out});
    ASSERT_TRUE(is_ok(run_kernel("aten::_native_batch_norm_legit_no_training.out", args)));
    const auto got = values_of<float>(out);
    for (size_t i = 0; i < got.size(); ++i) {
      const size_t c = (i / 4) % 3;
      double expected = (values[i] - mean[c]) / std::sqrt(var[c] + eps);
      if (affine) expected = expected * w[c] + b[c];
      EXPECT_NEAR(got[i], expected, 1e-5) << i;
    }
    EXPECT_EQ(shape_of(mean_out), (std::vector<int64_t>{0}));
    EXPECT_EQ(shape_of(invstd_out), (std::vector<int64_t>{0}));
  }
}

TEST(KernelPooling, BatchNormRejectsMismatchedChannelVectorsAndRankOneInput) {
  TensorStore store;
  Tensor& input = store.make<float>({1, 3, 2}, iota_floats(6, 1.0f));
  Tensor& stats3 = store.make<float>({3}, {0, 0, 0});
  Tensor& stats2 = store.make<float>({2}, {1, 1});
  Tensor& double_stats = store.make<double>({3}, {1, 1, 1});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 3, 2});
  Tensor& m = store.make_empty(ScalarType::kFloat, {0});
  Tensor& s = store.make_empty(ScalarType::kFloat, {0});
  const std::string key = "aten::_native_batch_norm_legit_no_training.out";
  auto call = [&](Tensor& in, Tensor& mean, Tensor& var) {
    Args args;
    args.tensor(in).none().none().tensor(mean).tensor(var).real(0.1).real(1e-5);
    args.outs({&out, &m, &s});
    return run_kernel(key, args);
  };
  EXPECT_TRUE(fails_with(call(input, stats2, stats3), {key, "running_mean", "[3]"}));
  EXPECT_TRUE(fails_with(call(input, stats3, double_stats), {key, "running_var", "float64"}));
  Tensor& flat = store.make<float>({3}, {1, 2, 3});
  EXPECT_TRUE(fails_with(call(flat, stats3, stats3), {key, "rank >= 2"}));
}

// --- upsample_nearest2d / upsample_bilinear2d ---------------------------------------------

TEST(KernelPooling, NearestUpsampleRepeatsPixelsByFloorOfTheScaledIndex) {
  TensorStore store;
  Tensor& self = store.make<int16_t>({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor& out = store.make_empty(ScalarType::kShort, {1, 1, 4, 6});
  Args by_scale;
  by_scale.tensor(self).none().doubles({2.0, 2.0}).tensor(out).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::upsample_nearest2d.vec_out", by_scale)));
  EXPECT_EQ(values_of<int16_t>(out), (std::vector<int16_t>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3,  //
                                                           4, 4, 5, 5, 6, 6, 4, 4, 5, 5, 6, 6}));
  // Width 3 -> 5: source floor(x * 3 / 5) = 0, 0, 1, 1, 2; height 2 -> 1 keeps row 0.
  Tensor& odd = store.make_empty(ScalarType::kShort, {1, 1, 1, 5});
  Args by_size;
  by_size.tensor(self).ints({1, 5}).none().tensor(odd).same_as(3);
  ASSERT_TRUE(is_ok(run_kernel("aten::upsample_nearest2d.vec_out", by_size)));
  EXPECT_EQ(values_of<int16_t>(odd), (std::vector<int16_t>{1, 1, 2, 2, 3}));
}

// Bilinear reference from the formulas: source = (d + 0.5) * in / out - 0.5
// clamped at 0 (or d * (in - 1) / (out - 1) with align_corners).
std::vector<double> reference_bilinear(const std::vector<float>& in, int64_t h, int64_t w, int64_t out_h, int64_t out_w,
                                       bool align_corners) {
  auto source = [&](int64_t d, int64_t in_size, int64_t out_size) {
    if (align_corners) return out_size > 1 ? d * double(in_size - 1) / double(out_size - 1) : 0.0;
    return std::max(0.0, (d + 0.5) * double(in_size) / double(out_size) - 0.5);
  };
  std::vector<double> result;
  for (int64_t y = 0; y < out_h; ++y) {
    const double sy = source(y, h, out_h);
    const int64_t y0 = std::min<int64_t>(static_cast<int64_t>(sy), h - 1), y1 = std::min<int64_t>(y0 + 1, h - 1);
    const double fy = std::min(1.0, sy - y0);
    for (int64_t x = 0; x < out_w; ++x) {
      const double sx = source(x, w, out_w);
      const int64_t x0 = std::min<int64_t>(static_cast<int64_t>(sx), w - 1), x1 = std::min<int64_t>(x0 + 1, w - 1);
      const double fx = std::min(1.0, sx - x0);
      auto at = [&](int64_t yy, int64_t xx) { return static_cast<double>(in[static_cast<size_t>(yy * w + xx)]); };
      const double top = at(y0, x0) * (1 - fx) + at(y0, x1) * fx;
      const double bottom = at(y1, x0) * (1 - fx) + at(y1, x1) * fx;
      result.push_back(top * (1 - fy) + bottom * fy);
    }
  }
  return result;
}

TEST(KernelPooling, BilinearUpsampleWithAndWithoutAlignCorners) {
  TensorStore store;
  Tensor& row = store.make<float>({1, 1, 1, 2}, {0, 10});
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 1, 5});
  Args aligned;
  aligned.tensor(row).ints({1, 5}).boolean(true).none().tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::upsample_bilinear2d.vec_out", aligned)));
  EXPECT_EQ(values_of<float>(out), (std::vector<float>{0, 2.5f, 5, 7.5f, 10}));
  // Half-pixel centres: sources 0 (clamped), 0.1, 0.5, 0.9, 1.3 (clamped to the edge).
  Args half_pixel;
  half_pixel.tensor(row).none().boolean(false).doubles({1.0, 2.5}).tensor(out).same_as(4);
  ASSERT_TRUE(is_ok(run_kernel("aten::upsample_bilinear2d.vec_out", half_pixel)));
  const auto got = values_of<float>(out);
  const std::vector<float> expected = {0, 1, 5, 9, 10};
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-5) << i;

  Lcg rng(4);
  const auto values = rng.floats(2 * 3 * 3 * 4);
  Tensor& image = store.make<float>({2, 3, 3, 4}, values);
  Tensor& big = store.make_empty(ScalarType::kFloat, {2, 3, 7, 5});
  for (bool align : {false, true}) {
    Args args;
    args.tensor(image).ints({7, 5}).boolean(align).none().tensor(big).same_as(4);
    ASSERT_TRUE(is_ok(run_kernel("aten::upsample_bilinear2d.vec_out", args)));
    const auto result = values_of<float>(big);
    for (size_t p = 0; p < 6; ++p) {
      const std::vector<float> plane(values.begin() + static_cast<long>(p * 12),
                                     values.begin() + static_cast<long>(p * 12 + 12));
      const auto ref = reference_bilinear(plane, 3, 4, 7, 5, align);
      for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(result[p * 35 + i], ref[i], 1e-5) << align << " " << i;
    }
  }
}

TEST(KernelPooling, UpsampleNeedsExactlyOneOfOutputSizeAndScaleFactors) {
  TensorStore store;
  Tensor& self = store.make<float>({1, 1, 2, 2}, iota_floats(4, 1.0f));
  Tensor& out = store.make_empty(ScalarType::kFloat, {1, 1, 4, 4}, bounded());
  const std::string nearest = "aten::upsample_nearest2d.vec_out";
  Args both;
  both.tensor(self).ints({4, 4}).doubles({2.0, 2.0}).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel(nearest, both), {nearest, "exactly one"}));
  Args neither;
  neither.tensor(self).none().none().tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel(nearest, neither), {nearest, "exactly one"}));
  Args shrink_to_nothing;
  shrink_to_nothing.tensor(self).none().doubles({0.25, 1.0}).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel(nearest, shrink_to_nothing), {nearest, "empty"}));
  Args negative;
  negative.tensor(self).none().doubles({-1.0, 1.0}).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel(nearest, negative), {nearest, "scale_factors"}));
  Args ints_as_scales;
  ints_as_scales.tensor(self).none().ints({2, 2}).tensor(out).same_as(3);
  EXPECT_TRUE(fails_with(run_kernel(nearest, ints_as_scales), {nearest, "DoubleList"}));
  const std::string bilinear = "aten::upsample_bilinear2d.vec_out";
  Tensor& three_d = store.make<float>({1, 2, 2}, iota_floats(4, 1.0f));
  Args rank3;
  rank3.tensor(three_d).ints({4, 4}).boolean(false).none().tensor(out).same_as(4);
  EXPECT_TRUE(fails_with(run_kernel(bilinear, rank3), {bilinear, "[N, C, H, W]"}));
}

// --- layouts ------------------------------------------------------------------------------

// The same image stored NCHW and NHWC.
struct TwoLayouts {
  Tensor* nchw;
  Tensor* nhwc;
};

TwoLayouts image_in_both_layouts(TensorStore& store, int64_t n, int64_t c, int64_t h, int64_t w,
                                 const std::vector<float>& nchw_values) {
  std::vector<float> nhwc_values(nchw_values.size());
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t k = 0; k < c; ++k) {
      for (int64_t y = 0; y < h; ++y) {
        for (int64_t x = 0; x < w; ++x) {
          nhwc_values[static_cast<size_t>(((a * h + y) * w + x) * c + k)] =
              nchw_values[static_cast<size_t>(((a * c + k) * h + y) * w + x)];
        }
      }
    }
  }
  TensorOptions channels_last;
  channels_last.dim_order = {0, 2, 3, 1};
  return {&store.make<float>({n, c, h, w}, nchw_values), &store.make<float>({n, c, h, w}, nhwc_values, channels_last)};
}

TEST(KernelPooling, ChannelsLastInputsGiveTheSameResults) {
  TensorStore store;
  Lcg rng(17);
  const auto values = rng.floats(2 * 3 * 5 * 4);
  const TwoLayouts in = image_in_both_layouts(store, 2, 3, 5, 4, values);
  std::vector<std::vector<float>> results;
  for (Tensor* image : {in.nchw, in.nhwc}) {
    Tensor& out = store.make_empty(ScalarType::kFloat, {2, 3, 3, 2});
    Tensor& indices = store.make_empty(ScalarType::kLong, {2, 3, 3, 2});
    ASSERT_TRUE(is_ok(run_max_pool(*image, {{3, 2}, {2}, {1, 0}, {1}}, out, indices)));
    results.push_back(values_of<float>(out));
    Tensor& avg = store.make_empty(ScalarType::kFloat, {2, 3, 3, 2});
    ASSERT_TRUE(is_ok(run_avg_pool(*image, {3, 2}, {2}, {1, 0}, false, false, std::nullopt, avg)));
    results.push_back(values_of<float>(avg));
    Tensor& up = store.make_empty(ScalarType::kFloat, {2, 3, 7, 6});
    Args bilinear;
    bilinear.tensor(*image).ints({7, 6}).boolean(false).none().tensor(up).same_as(4);
    ASSERT_TRUE(is_ok(run_kernel("aten::upsample_bilinear2d.vec_out", bilinear)));
    results.push_back(values_of<float>(up));
  }
  EXPECT_EQ(results[0], results[3]);
  EXPECT_EQ(results[1], results[4]);
  EXPECT_EQ(results[2], results[5]);
}

}  // namespace
}  // namespace etna::kernel_test
