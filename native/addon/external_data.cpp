#include "external_data.h"

#include "convert.h"
#include "core/data_map.h"
#include "core/dtype.h"
#include "program_wrap.h"

namespace etna::addon {
namespace {

Napi::Value describe_external_data(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  return guard(env, [&]() -> Napi::Value {
    const ByteSpan bytes = bytes_argument(info, "describeExternalData");
    auto map = DataMap::load_bytes(bytes.data, bytes.size);
    if (!map) throw make_js_error(env, map.error());
    Napi::Array tensors = Napi::Array::New(env, (*map)->size());
    uint32_t index = 0;
    for (const auto& [key, blob] : (*map)->entries()) {
      Napi::Object tensor = Napi::Object::New(env);
      tensor.Set("key", key);
      if (blob.has_layout) {
        tensor.Set("dtype", std::string(dtype_name(static_cast<ScalarType>(blob.scalar_type))));
        Napi::Array shape = Napi::Array::New(env, blob.sizes.size());
        for (uint32_t d = 0; d < blob.sizes.size(); ++d) shape.Set(d, static_cast<double>(blob.sizes[d]));
        tensor.Set("shape", shape);
      } else {
        tensor.Set("dtype", env.Null());
        tensor.Set("shape", env.Null());
      }
      tensor.Set("bytes", static_cast<double>(blob.bytes.size));
      tensors.Set(index++, tensor);
    }
    Napi::Object description = Napi::Object::New(env);
    description.Set("segments", static_cast<double>((*map)->segment_count()));
    description.Set("tensors", tensors);
    return description;
  });
}

}  // namespace

void init_external_data(Napi::Env env, Napi::Object exports) {
  exports.Set("describeExternalData", Napi::Function::New(env, describe_external_data, "describeExternalData"));
}

}  // namespace etna::addon
