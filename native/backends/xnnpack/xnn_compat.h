// The two XNNPACK operator APIs etna builds against, behind one interface.
//
// 2022 (Debian 12): an operator is created from its parameters alone, and one
// setup call takes the input shape, the buffers and the thread pool.
// 2024 (Debian 13): creation also takes a code cache and a weights cache
// (etna passes none), setup is split into reshape (shape, thread pool, and
// for convolution the size of a caller-owned workspace) and setup (buffers),
// and the per-channel int8 convolution is named qs8_qc8w instead of qc8.
//
// ETNA_XNNPACK_RESHAPE_API (set by CMake from a compile check against the
// installed xnnpack.h; unset means the 2022 API) picks the branch. The same
// XNNPACK operators run either way; only the calls around them differ.
#pragma once

#include <pthreadpool.h>
#include <xnnpack.h>

#include <cstddef>
#include <cstdint>

#ifndef ETNA_XNNPACK_RESHAPE_API
#define ETNA_XNNPACK_RESHAPE_API 0
#endif

namespace etna::xnn::compat {

// Calls an xnn_create_* function with `args` (its parameters up to and
// including the flags) and stores the operator in *op.
template <typename Create, typename... Args>
xnn_status create_operator(Create create, xnn_operator_t* op, Args... args) {
#if ETNA_XNNPACK_RESHAPE_API
  return create(args..., nullptr, nullptr, op);
#else
  return create(args..., op);
#endif
}

// The per-channel int8 convolution (int8 activations, one filter scale per
// output channel), and its name for error messages.
#if ETNA_XNNPACK_RESHAPE_API
inline constexpr auto create_convolution2d_nhwc_qc8 = &xnn_create_convolution2d_nhwc_qs8_qc8w;
inline constexpr const char* kCreateConvolution2dNhwcQc8 = "xnn_create_convolution2d_nhwc_qs8_qc8w";
#else
inline constexpr auto create_convolution2d_nhwc_qc8 = &xnn_create_convolution2d_nhwc_qc8;
inline constexpr const char* kCreateConvolution2dNhwcQc8 = "xnn_create_convolution2d_nhwc_qc8";
#endif

// A copy operator over 32-bit elements with no parameters worth keeping;
// creating one allocates, which is how the allocator probe sees XNNPACK use it.
xnn_status create_probe_operator(xnn_operator_t* op);

struct ImageSize {
  size_t batch = 0;
  size_t height = 1;
  size_t width = 1;
};

// The extra output rows and columns of a transposed convolution.
struct Adjustment {
  uint32_t height = 0;
  uint32_t width = 0;
};

// How setting up and running an operator went: success, or the call that
// failed and its status.
struct Outcome {
  xnn_status status = xnn_status_success;
  const char* call = "";
};

// Set an operator up for one input shape and its buffers, then run it. The
// element type picks the arithmetic: float (f32), int8_t (qs8) or uint8_t
// (qu8); the per-channel int8 convolution has its own function.
Outcome run_fully_connected(xnn_operator_t op, size_t batch, const float* input, float* output,
                            pthreadpool_t threadpool);
Outcome run_fully_connected(xnn_operator_t op, size_t batch, const int8_t* input, int8_t* output,
                            pthreadpool_t threadpool);
Outcome run_fully_connected(xnn_operator_t op, size_t batch, const uint8_t* input, uint8_t* output,
                            pthreadpool_t threadpool);
Outcome run_convolution(xnn_operator_t op, ImageSize size, const float* input, float* output, pthreadpool_t threadpool);
Outcome run_convolution(xnn_operator_t op, ImageSize size, const int8_t* input, int8_t* output,
                        pthreadpool_t threadpool);
Outcome run_convolution(xnn_operator_t op, ImageSize size, const uint8_t* input, uint8_t* output,
                        pthreadpool_t threadpool);
Outcome run_convolution_qc8(xnn_operator_t op, ImageSize size, const int8_t* input, int8_t* output,
                            pthreadpool_t threadpool);
Outcome run_deconvolution(xnn_operator_t op, ImageSize size, Adjustment adjustment, const float* input, float* output,
                          pthreadpool_t threadpool);
Outcome run_deconvolution(xnn_operator_t op, ImageSize size, Adjustment adjustment, const int8_t* input, int8_t* output,
                          pthreadpool_t threadpool);
Outcome run_deconvolution(xnn_operator_t op, ImageSize size, Adjustment adjustment, const uint8_t* input,
                          uint8_t* output, pthreadpool_t threadpool);

}  // namespace etna::xnn::compat
