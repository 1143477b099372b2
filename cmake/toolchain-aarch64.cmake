# Cross-compiles etna for linux-arm64 (aarch64) on an x86-64 Debian machine
# with Debian's cross compiler (g++-aarch64-linux-gnu). The arm64 builds of
# XNNPACK, pthreadpool, cpuinfo, flatbuffers and GoogleTest come from an
# unpacked sysroot (scripts/build-arm64.sh makes it): Debian's XNNPACK and
# pthreadpool packages cannot be installed for two architectures at once, so
# installing the arm64 ones would remove the machine's own.
#   cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake ...
# The sysroot is build-arm64/sysroot unless $ETNA_ARM64_SYSROOT names another.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# An environment variable rather than a cache one: CMake reads this file
# again for every check it compiles, where only the environment carries over.
if(DEFINED ENV{ETNA_ARM64_SYSROOT})
  set(etna_arm64_sysroot "$ENV{ETNA_ARM64_SYSROOT}")
else()
  get_filename_component(etna_arm64_sysroot "${CMAKE_CURRENT_LIST_DIR}/../build-arm64/sysroot" ABSOLUTE)
endif()
if(NOT EXISTS "${etna_arm64_sysroot}/usr/include/xnnpack.h")
  message(FATAL_ERROR "no arm64 sysroot at ${etna_arm64_sysroot}: run scripts/build-arm64.sh")
endif()

# Libraries, headers and packages only from the sysroot and the cross
# compiler's own tree; programs (flatc, ninja) from this machine.
set(CMAKE_FIND_ROOT_PATH "${etna_arm64_sysroot}" /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# libXNNPACK.so.0 needs libcpuinfo.so.0 and libpthreadpool.so.0; the linker
# checks an executable's indirect libraries too, and finds these only if told.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${etna_arm64_sysroot}/usr/lib/aarch64-linux-gnu")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,${etna_arm64_sysroot}/usr/lib/aarch64-linux-gnu")

# The sysroot's folder means nothing on an arm64 machine: no run-time search
# path points there (the emulator below sets LD_LIBRARY_PATH instead).
set(CMAKE_SKIP_RPATH ON)

# How this machine runs the arm64 programs: gtest_discover_tests lists the
# tests with it after each link, and ctest runs them with it. Settings by
# environment, so that a program the test starts (a death test runs its own
# program again, through binfmt_misc) finds the same C and C++ runtimes (the
# cross compiler's) and libraries (the sysroot's).
set(CMAKE_CROSSCOMPILING_EMULATOR
  env QEMU_LD_PREFIX=/usr/aarch64-linux-gnu "LD_LIBRARY_PATH=${etna_arm64_sysroot}/usr/lib/aarch64-linux-gnu"
  qemu-aarch64-static)
