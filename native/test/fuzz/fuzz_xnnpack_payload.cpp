// Fuzz target: arbitrary bytes as an XnnpackBackend delegate payload. Each
// input goes through the payload parser alone and then through the backend's
// init (parse, graph checks, XNNPACK graph building and weight packing) as a
// method load would call it. Named data comes from the real programs that
// have some (djl_conv_xnnpack.pte and djl_lin129_planned.pte, or the files
// listed in $ETNA_FUZZ_NAMED_DATA_PROGRAMS, separated by ':'), so payloads
// that reference constants by key can resolve them: the parser alone looks
// keys up in all of them, init runs once per program.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "backends/xnnpack/payload.h"
#include "core/backend.h"
#include "core/program.h"
#include "fuzz_common.h"

namespace {

std::vector<std::shared_ptr<const etna::Program>> g_programs;
const etna::Backend* g_backend = nullptr;

std::vector<std::string> named_data_program_paths() {
  std::vector<std::string> paths;
  if (const char* list = std::getenv("ETNA_FUZZ_NAMED_DATA_PROGRAMS")) {
    std::string text = list;
    size_t start = 0;
    while (start <= text.size()) {
      size_t end = text.find(':', start);
      if (end == std::string::npos) end = text.size();
      if (end > start) paths.push_back(text.substr(start, end - start));
      start = end + 1;
    }
    return paths;
  }
  const std::string dir = etna::fuzz::testdata_dir();
  return {dir + "/djl_conv_xnnpack.pte", dir + "/djl_lin129_planned.pte"};
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const std::string& path : named_data_program_paths()) {
    auto program = etna::Program::load_file(path);
    if (!program) {
      std::fprintf(stderr, "fuzz_xnnpack_payload: cannot load %s: %s\n", path.c_str(), program.error().message.c_str());
      std::exit(2);
    }
    g_programs.push_back(*program);
  }
  etna::backends::register_xnnpack_backend();
  g_backend = etna::find_backend("XnnpackBackend");
  if (g_backend == nullptr) {
    std::fprintf(stderr, "fuzz_xnnpack_payload: XnnpackBackend is not registered\n");
    std::exit(2);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The payload's own bytes, copied so that the parser sees exactly `size`
  // bytes (ASan then flags any read past the end).
  std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  const etna::ByteSpan payload{copy.get(), size};

  etna::xnn::NamedDataLookup lookup = [](std::string_view key) -> std::optional<etna::ByteSpan> {
    for (const auto& program : g_programs) {
      if (auto blob = program->named_data(key)) return blob;
    }
    return std::nullopt;
  };
  auto parsed = etna::xnn::parse_payload(payload, lookup);
  if (!parsed) return 0;

  // Init as a method load does, against each program's named data, in both
  // workspace modes (one module-wide workspace, one per delegate).
  for (const auto& program : g_programs) {
    for (bool share_workspace : {true, false}) {
      etna::BackendOptions options;
      options.share_workspace = share_workspace;
      std::unique_ptr<etna::BackendModuleContext> module_context = g_backend->create_module_context(options);
      etna::DelegateInitContext context{*program, module_context.get(), "forward", 0};
      auto handle = g_backend->init(payload, {}, context);
      if (!handle) continue;
      (void)module_context->memory();
    }
  }
  return 0;
}
