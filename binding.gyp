{
  "targets": [
    {
      "target_name": "etna",
      "sources": [
        "<!@(node scripts/native-sources.cjs core kernels backends addon)"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native",
        "native/core"
      ],
      "defines": [
        "NAPI_VERSION=8",
        "NAPI_CPP_EXCEPTIONS",
        "NODE_API_NO_EXTERNAL_BUFFERS_ALLOWED",
        "NODE_API_SWALLOW_UNTHROWABLE_EXCEPTIONS"
      ],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++1y", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-Wall", "-Wextra"],
      # As CMakeLists.txt: no implicit multiply-adds where the CPU has them (aarch64).
      "conditions": [
        ["target_arch not in ('x64', 'ia32')", { "cflags_cc": ["-ffp-contract=off", "-Wno-psabi"] }]
      ],
      "libraries": ["-lXNNPACK", "-lpthreadpool", "-lpthread"]
    }
  ]
}
