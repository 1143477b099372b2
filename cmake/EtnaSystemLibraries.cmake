# The system libraries etna builds against, and what differs between the
# Debian releases it supports (12 bookworm, 13 trixie).
#   etna_find_system_libraries(<repository root>)
# defines the interface targets
#   etna_flatbuffers   the flatbuffers headers and the generated C++ for schema/
#   etna_pthreadpool   pthreadpool (the process's thread pools, native/core/thread_pool.h)
#   etna_xnnpack       XNNPACK and pthreadpool, with ETNA_XNNPACK_RESHAPE_API
include(CheckCXXSourceCompiles)

# A flatbuffers version "major.minor.revision" read from `file`, where each
# part follows "FLATBUFFERS_VERSION_<MAJOR|MINOR|REVISION><separator>":
# " " in flatbuffers/base.h (the installed headers), " == " in flatc's output
# (the version its static_assert demands).
function(etna_flatbuffers_version file separator out)
  file(READ "${file}" text)
  set(parts "")
  foreach(part MAJOR MINOR REVISION)
    string(REGEX MATCH "FLATBUFFERS_VERSION_${part}${separator}([0-9]+)" match "${text}")
    list(APPEND parts "${CMAKE_MATCH_1}")
  endforeach()
  list(JOIN parts "." version)
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

function(etna_find_system_libraries root)
  find_path(FLATBUFFERS_INCLUDE_DIR flatbuffers/flatbuffers.h REQUIRED)
  find_path(XNNPACK_INCLUDE_DIR xnnpack.h REQUIRED)
  find_path(PTHREADPOOL_INCLUDE_DIR pthreadpool.h REQUIRED)
  find_library(XNNPACK_LIBRARY XNNPACK REQUIRED)
  find_library(PTHREADPOOL_LIBRARY pthreadpool REQUIRED)
  find_package(Threads REQUIRED)

  # --- FlatBuffers ---------------------------------------------------------
  # The repository commits flatc's C++ output (native/core/generated and
  # native/backends/xnnpack/generated), which compiles only against the
  # flatbuffers headers of the flatc that wrote it.
  # With other headers, the system's flatc regenerates it into the build tree.
  add_library(etna_flatbuffers INTERFACE)
  target_include_directories(etna_flatbuffers INTERFACE "${FLATBUFFERS_INCLUDE_DIR}")
  file(GLOB committed_headers
    "${root}/native/core/generated/*_generated.h"
    "${root}/native/backends/xnnpack/generated/*_generated.h")
  list(GET committed_headers 0 first_header)
  etna_flatbuffers_version("${FLATBUFFERS_INCLUDE_DIR}/flatbuffers/base.h" " " installed_version)
  etna_flatbuffers_version("${first_header}" " == " committed_version)
  if(NOT installed_version STREQUAL committed_version)
    find_program(FLATC_EXECUTABLE flatc REQUIRED)
    execute_process(COMMAND "${FLATC_EXECUTABLE}" --version OUTPUT_VARIABLE flatc_version OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT flatc_version MATCHES "version ${installed_version}$")
      message(FATAL_ERROR "flatbuffers headers are ${installed_version} but ${FLATC_EXECUTABLE} is '${flatc_version}'")
    endif()
    message(STATUS "flatbuffers ${installed_version}: generating C++ for schema/ (committed code is for ${committed_version})")
    set(generated_dir "${CMAKE_BINARY_DIR}/flatbuffers/generated")
    set(outputs "")
    foreach(committed ${committed_headers})
      get_filename_component(header "${committed}" NAME)
      string(REGEX REPLACE "_generated\\.h$" "" schema "${header}")
      # Same flags as scripts/codegen.mjs.
      add_custom_command(
        OUTPUT "${generated_dir}/${header}"
        COMMAND "${FLATC_EXECUTABLE}" --cpp --scoped-enums -o "${generated_dir}" "${root}/schema/${schema}.fbs"
        DEPENDS "${root}/schema/${schema}.fbs"
        COMMENT "flatc ${installed_version}: ${header}")
      list(APPEND outputs "${generated_dir}/${header}")
      # A file beside a generated/ folder finds the committed copy before any
      # include path, so the new headers are also pre-included: their include
      # guards, the same as the committed ones', turn those includes into no-ops.
      target_compile_options(etna_flatbuffers INTERFACE "SHELL:-include ${generated_dir}/${header}")
    endforeach()
    add_custom_target(etna_flatbuffers_generated DEPENDS ${outputs})
    add_dependencies(etna_flatbuffers etna_flatbuffers_generated)
    target_include_directories(etna_flatbuffers BEFORE INTERFACE "${CMAKE_BINARY_DIR}/flatbuffers")
  endif()

  add_library(etna_pthreadpool INTERFACE)
  target_include_directories(etna_pthreadpool INTERFACE "${PTHREADPOOL_INCLUDE_DIR}")
  target_link_libraries(etna_pthreadpool INTERFACE ${PTHREADPOOL_LIBRARY} Threads::Threads)

  # --- XNNPACK -------------------------------------------------------------
  # The 2024 operator API splits setup into reshape + setup; the 2022 one has
  # no reshape functions (see native/backends/xnnpack/xnn_compat.h).
  set(CMAKE_REQUIRED_INCLUDES "${XNNPACK_INCLUDE_DIR}")
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)  # compile only: a declaration is what tells the APIs apart
  check_cxx_source_compiles("
    #include <xnnpack.h>
    int main() { return xnn_reshape_fully_connected_nc_f32(nullptr, 1, nullptr) == xnn_status_success; }"
    ETNA_XNNPACK_RESHAPE_API)
  add_library(etna_xnnpack INTERFACE)
  target_include_directories(etna_xnnpack INTERFACE "${XNNPACK_INCLUDE_DIR}")
  target_link_libraries(etna_xnnpack INTERFACE ${XNNPACK_LIBRARY} etna_pthreadpool)
  if(ETNA_XNNPACK_RESHAPE_API)
    target_compile_definitions(etna_xnnpack INTERFACE ETNA_XNNPACK_RESHAPE_API=1)
    # That release deprecates the per-operator subgraph definitions
    # (xnn_define_add2, xnn_define_clamp, ...) for xnn_define_binary/unary.
    # They still define the same nodes, and they are all the 2022 release
    # has, so the files that call them are built without that one warning.
    set_source_files_properties(
      "${root}/native/backends/xnnpack/node_types.cpp" "${root}/native/backends/xnnpack/subgraph_stage.cpp"
      PROPERTIES COMPILE_OPTIONS -Wno-deprecated-declarations)
  endif()
endfunction()
