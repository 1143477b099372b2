// Writes the delegate payloads of real programs as seed inputs for
// fuzz_xnnpack_payload:
//   fuzz_seed_payloads OUT_DIR PROGRAM.pte...
// Each XnnpackBackend payload becomes OUT_DIR/<program>-<method>-<n>.bin.
// Files that do not load are skipped with a note.
#include <cstdio>
#include <fstream>
#include <string>

#include "core/program.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT_DIR PROGRAM.pte...\n", argv[0]);
    return 2;
  }
  const std::string out_dir = argv[1];
  int written = 0;
  for (int arg = 2; arg < argc; ++arg) {
    const std::string path = argv[arg];
    auto program = etna::Program::load_file(path);
    if (!program) {
      std::fprintf(stderr, "skipping %s: %s\n", path.c_str(), program.error().message.c_str());
      continue;
    }
    std::string stem = path.substr(path.find_last_of('/') + 1);
    if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".pte") == 0) stem.resize(stem.size() - 4);
    for (size_t m = 0; m < (*program)->method_count(); ++m) {
      const auto& plan = (*program)->method(m);
      const auto* delegates = plan.delegates();
      if (delegates == nullptr) continue;
      for (flatbuffers::uoffset_t d = 0; d < delegates->size(); ++d) {
        const auto* delegate = delegates->Get(d);
        if (delegate->id() == nullptr || delegate->id()->str() != "XnnpackBackend") continue;
        const etna::ByteSpan bytes = (*program)->delegate_payload(*delegate);
        const std::string name = out_dir + "/" + stem + "-" + plan.name()->str() + "-" + std::to_string(d) + ".bin";
        std::ofstream out(name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data), static_cast<std::streamsize>(bytes.size));
        if (!out) {
          std::fprintf(stderr, "cannot write %s\n", name.c_str());
          return 1;
        }
        ++written;
      }
    }
  }
  std::printf("%d payload seed(s) written to %s\n", written, out_dir.c_str());
  return 0;
}
