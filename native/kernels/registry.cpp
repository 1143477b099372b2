#include "core/kernel.h"
#include "kernels/kernel_groups.h"

namespace etna {

void KernelRegistry::add(std::string key, KernelFn fn, int arity) { entries_[std::move(key)] = KernelEntry{fn, arity}; }

const KernelEntry* KernelRegistry::find(std::string_view key) const {
  auto it = entries_.find(std::string(key));
  return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> KernelRegistry::keys() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) out.push_back(key);
  return out;
}

const KernelRegistry& kernel_registry() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    kernels::register_binary_kernels(r);
    kernels::register_unary_kernels(r);
    kernels::register_reduction_kernels(r);
    kernels::register_normalization_kernels(r);
    kernels::register_matmul_kernels(r);
    kernels::register_convolution_kernels(r);
    kernels::register_shape_kernels(r);
    kernels::register_copy_kernels(r);
    kernels::register_indexing_kernels(r);
    kernels::register_factory_kernels(r);
    kernels::register_prim_kernels(r);
    kernels::register_onnx_support_kernels(r);
    kernels::register_llm_kernels(r);
    kernels::register_quantized_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace etna
