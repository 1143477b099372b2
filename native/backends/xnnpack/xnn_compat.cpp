#include "backends/xnnpack/xnn_compat.h"

#include <cstdlib>
#include <memory>

#include "core/thread_pool.h"

// An XNNPACK function together with its name, for error messages.
#define ETNA_XNN_CALL(function) function, #function

// Returns from the enclosing function when an XNNPACK call fails.
#define ETNA_XNN_CHECK(name, call)                                                 \
  do {                                                                             \
    const xnn_status etna_xnn_status_ = (call);                                    \
    if (etna_xnn_status_ != xnn_status_success) return {etna_xnn_status_, (name)}; \
  } while (0)

namespace etna::xnn::compat {
namespace {

Outcome run_operator(xnn_operator_t op, pthreadpool_t threadpool) {
  ThreadPool::note_work(threadpool);
  return {xnn_run_operator(op, threadpool), "xnn_run_operator"};
}

#if ETNA_XNNPACK_RESHAPE_API

// Scratch memory a convolution needs from setup to run, sized and aligned as
// its reshape call asked.
class Workspace {
 public:
  bool allocate(size_t size, size_t alignment) {
    if (size == 0) return true;
    if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
    memory_.reset(std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment));
    return memory_ != nullptr;
  }
  void* data() const { return memory_.get(); }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> memory_;
};

template <typename T>
Outcome fully_connected(xnn_status (*reshape)(xnn_operator_t, size_t, pthreadpool_t), const char* reshape_name,
                        xnn_status (*setup)(xnn_operator_t, const T*, T*), const char* setup_name, xnn_operator_t op,
                        size_t batch, const T* input, T* output, pthreadpool_t threadpool) {
  ETNA_XNN_CHECK(reshape_name, reshape(op, batch, threadpool));
  ETNA_XNN_CHECK(setup_name, setup(op, input, output));
  return run_operator(op, threadpool);
}

using ReshapeConvolution = xnn_status (*)(xnn_operator_t, size_t, size_t, size_t, size_t*, size_t*, size_t*, size_t*,
                                          pthreadpool_t);

template <typename T>
Outcome convolution(ReshapeConvolution reshape, const char* reshape_name,
                    xnn_status (*setup)(xnn_operator_t, void*, const T*, T*), const char* setup_name, xnn_operator_t op,
                    ImageSize size, const T* input, T* output, pthreadpool_t threadpool) {
  size_t workspace_size = 0, workspace_alignment = 0, output_height = 0, output_width = 0;
  ETNA_XNN_CHECK(reshape_name, reshape(op, size.batch, size.height, size.width, &workspace_size, &workspace_alignment,
                                       &output_height, &output_width, threadpool));
  Workspace workspace;
  if (!workspace.allocate(workspace_size, workspace_alignment)) {
    return {xnn_status_out_of_memory, "aligned_alloc (convolution workspace)"};
  }
  ETNA_XNN_CHECK(setup_name, setup(op, workspace.data(), input, output));
  return run_operator(op, threadpool);
}

using ReshapeDeconvolution = xnn_status (*)(xnn_operator_t, size_t, size_t, size_t, uint32_t, uint32_t, size_t*,
                                            size_t*, pthreadpool_t);

template <typename T>
Outcome deconvolution(ReshapeDeconvolution reshape, const char* reshape_name,
                      xnn_status (*setup)(xnn_operator_t, const T*, T*), const char* setup_name, xnn_operator_t op,
                      ImageSize size, Adjustment adjustment, const T* input, T* output, pthreadpool_t threadpool) {
  size_t output_height = 0, output_width = 0;
  ETNA_XNN_CHECK(reshape_name, reshape(op, size.batch, size.height, size.width, adjustment.height, adjustment.width,
                                       &output_height, &output_width, threadpool));
  ETNA_XNN_CHECK(setup_name, setup(op, input, output));
  return run_operator(op, threadpool);
}

}  // namespace

#define ETNA_XNN_STAGES(family) ETNA_XNN_CALL(xnn_reshape_##family), ETNA_XNN_CALL(xnn_setup_##family)
#define ETNA_XNN_CONVOLUTION_QC8_STAGES ETNA_XNN_STAGES(convolution2d_nhwc_qs8_qc8w)

xnn_status create_probe_operator(xnn_operator_t* op) { return xnn_create_copy_nc_x32(0, op); }

#else  // the 2022 API: one setup call with shape, buffers and thread pool

template <typename T>
Outcome fully_connected(xnn_status (*setup)(xnn_operator_t, size_t, const T*, T*, pthreadpool_t),
                        const char* setup_name, xnn_operator_t op, size_t batch, const T* input, T* output,
                        pthreadpool_t threadpool) {
  ETNA_XNN_CHECK(setup_name, setup(op, batch, input, output, threadpool));
  return run_operator(op, threadpool);
}

template <typename T>
Outcome convolution(xnn_status (*setup)(xnn_operator_t, size_t, size_t, size_t, const T*, T*, pthreadpool_t),
                    const char* setup_name, xnn_operator_t op, ImageSize size, const T* input, T* output,
                    pthreadpool_t threadpool) {
  ETNA_XNN_CHECK(setup_name, setup(op, size.batch, size.height, size.width, input, output, threadpool));
  return run_operator(op, threadpool);
}

template <typename T>
Outcome deconvolution(xnn_status (*setup)(xnn_operator_t, size_t, size_t, size_t, uint32_t, uint32_t, const T*, T*,
                                          pthreadpool_t),
                      const char* setup_name, xnn_operator_t op, ImageSize size, Adjustment adjustment, const T* input,
                      T* output, pthreadpool_t threadpool) {
  ETNA_XNN_CHECK(setup_name, setup(op, size.batch, size.height, size.width, adjustment.height, adjustment.width, input,
                                   output, threadpool));
  return run_operator(op, threadpool);
}

}  // namespace

#define ETNA_XNN_STAGES(family) ETNA_XNN_CALL(xnn_setup_##family)
#define ETNA_XNN_CONVOLUTION_QC8_STAGES ETNA_XNN_STAGES(convolution2d_nhwc_qc8)

xnn_status create_probe_operator(xnn_operator_t* op) { return xnn_create_copy_nc_x32(1, 1, 1, 0, op); }

#endif

// ETNA_XNN_STAGES gives an operator family's stage functions (with their
// names) in the API in use, so from here on both APIs read the same.
// One arithmetic's three operator kinds:
#define ETNA_XNN_ARITHMETIC(T, suffix)                                                                                \
  Outcome run_fully_connected(xnn_operator_t op, size_t batch, const T* input, T* output, pthreadpool_t threadpool) { \
    return fully_connected(ETNA_XNN_STAGES(fully_connected_nc_##suffix), op, batch, input, output, threadpool);       \
  }                                                                                                                   \
  Outcome run_convolution(xnn_operator_t op, ImageSize size, const T* input, T* output, pthreadpool_t threadpool) {   \
    return convolution(ETNA_XNN_STAGES(convolution2d_nhwc_##suffix), op, size, input, output, threadpool);            \
  }                                                                                                                   \
  Outcome run_deconvolution(xnn_operator_t op, ImageSize size, Adjustment adjustment, const T* input, T* output,      \
                            pthreadpool_t threadpool) {                                                               \
    return deconvolution(ETNA_XNN_STAGES(deconvolution2d_nhwc_##suffix), op, size, adjustment, input, output,         \
                         threadpool);                                                                                 \
  }

ETNA_XNN_ARITHMETIC(float, f32)
ETNA_XNN_ARITHMETIC(int8_t, qs8)
ETNA_XNN_ARITHMETIC(uint8_t, qu8)

Outcome run_convolution_qc8(xnn_operator_t op, ImageSize size, const int8_t* input, int8_t* output,
                            pthreadpool_t threadpool) {
  return convolution(ETNA_XNN_CONVOLUTION_QC8_STAGES, op, size, input, output, threadpool);
}

}  // namespace etna::xnn::compat
