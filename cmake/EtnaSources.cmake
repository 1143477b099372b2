# native/sources.json is the one list of native sources; CMakeLists.txt,
# native/test/fuzz/CMakeLists.txt and binding.gyp all read it.
#   etna_sources(<repository root> <group> <output variable>)
function(etna_sources root group out)
  file(READ "${root}/native/sources.json" json)
  # Re-run configuration whenever the list changes.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${root}/native/sources.json")
  string(JSON count LENGTH "${json}" ${group})
  set(files "")
  if(count GREATER 0)
    math(EXPR last "${count} - 1")
    foreach(i RANGE ${last})
      string(JSON file GET "${json}" ${group} ${i})
      list(APPEND files "${root}/${file}")
    endforeach()
  endif()
  set(${out} ${files} PARENT_SCOPE)
endfunction()
