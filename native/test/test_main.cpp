// The main of every GoogleTest executable: registers the portable kernels and
// the XNNPACK backend into the runtime's registries, as the addon's init does.
#include <gtest/gtest.h>

#include "backends/registry.h"
#include "kernels/registry.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  etna::kernels::register_portable_kernels();
  etna::backends::register_xnnpack_backend();
  return RUN_ALL_TESTS();
}
