#include "backends/xnnpack/xnnpack_backend.h"

#include "backends/xnnpack/delegate.h"
#include "backends/xnnpack/module_context.h"
#include "backends/xnnpack/payload.h"
#include "backends/xnnpack/xnn_library.h"
#include "core/program.h"

namespace etna {
namespace {

using xnn::XnnpackModuleContext;

class XnnpackBackend final : public Backend {
 public:
  std::string_view id() const override { return "XnnpackBackend"; }

  std::unique_ptr<BackendModuleContext> create_module_context(const BackendOptions& options) const override {
    return std::make_unique<XnnpackModuleContext>(options);
  }

  std::shared_ptr<BackendProgramContext> create_program_context() const override {
    return std::make_shared<xnn::XnnpackProgramContext>();
  }

  // Compile specs are ignored, as upstream does.
  Result<std::unique_ptr<DelegateHandle>> init(ByteSpan payload, const std::vector<CompileSpecView>&,
                                               DelegateInitContext& context) const override {
    std::string label = "method '" + context.method_name + "', delegate " + std::to_string(context.delegate_index) +
                        " (XnnpackBackend)";
    auto prefixed = [&](const Error& e) { return make_error(e.code, label + ": " + e.message); };

    Status initialized = xnn::ensure_xnnpack_initialized();
    if (!initialized) return prefixed(initialized.error());

    // Without a module context (a caller running one delegate alone) the
    // delegate gets a private one with default options.
    std::unique_ptr<XnnpackModuleContext> own_context;
    XnnpackModuleContext* module_context = nullptr;
    if (context.module_context) {
      module_context = dynamic_cast<XnnpackModuleContext*>(context.module_context);
      if (!module_context) {
        return make_error(ErrorCode::kInternal, label + ": the module context was not created by XnnpackBackend");
      }
    } else {
      own_context = std::make_unique<XnnpackModuleContext>(BackendOptions{});
      module_context = own_context.get();
    }

    const Program& program = context.program;
    // Every module over the program shares its packed weights and its parsed payloads.
    auto program_context = std::dynamic_pointer_cast<xnn::XnnpackProgramContext>(program.backend_context(*this));
    if (!program_context) {
      return make_error(ErrorCode::kInternal, label + ": the program context was not created by XnnpackBackend");
    }
    auto known = program_context->checked_payload(payload);
    if (!known) {
      xnn::NamedDataLookup named_data = [&program](std::string_view key) { return program.named_data(key); };
      auto parsed = xnn::parse_payload(payload, named_data);
      if (!parsed) return prefixed(parsed.error());
      Status checked = xnn::XnnpackDelegate::check(parsed->graph);
      if (!checked) return prefixed(checked.error());
      program_context->remember_checked_payload(payload, std::move(*parsed));
      known = program_context->checked_payload(payload);
    }
    auto delegate = xnn::XnnpackDelegate::create(*known, *module_context, std::move(label), program_context, true,
                                                 known, xnn::NanHandling::kFast, std::move(own_context));
    if (!delegate) return delegate.error();
    return std::unique_ptr<DelegateHandle>(std::move(*delegate));
  }
};

}  // namespace

const Backend& xnnpack_backend() {
  static const XnnpackBackend backend;
  return backend;
}

std::optional<XnnpackStats> xnnpack_stats(const BackendModuleContext& context) {
  const auto* xnnpack_context = dynamic_cast<const XnnpackModuleContext*>(&context);
  if (!xnnpack_context) return std::nullopt;
  return xnnpack_context->stats();
}

}  // namespace etna
