# One object library per layer of the core, each compiled against only the folders it may use.
#
#   bindings/c -> runtime -> backends (the interface: backend.h, device.h, registry.h) -> common
#                        \-> fusion -> common          backends/<name> -> backends, common (fusion)
#
# hcoll_layer(<target> SOURCES ... SEES <path>...) gives <target> an include root of its own,
# build/layers/<target>/, holding symbolic links to exactly the SEES paths (folders or single
# headers, relative to src/ or else to the repository root). `#include "runtime/x.h"` from a
# layer that does not SEE runtime fails to compile: that is what keeps dependencies one way.
# Every layer sees the public headers (include/) and links spdlog and Threads (common/logging.h
# includes spdlog, whose compile definitions must match in every object).

set(HCOLL_BACKEND_INTERFACE backends/backend.h backends/device.h backends/registry.h)

function(hcoll_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;SEES;LIBS" ${ARGN})
  add_library(${name} OBJECT ${L_SOURCES})
  set(root ${PROJECT_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${root})
  foreach(path IN LISTS L_SEES)
    if(EXISTS ${PROJECT_SOURCE_DIR}/src/${path})
      set(target_path ${PROJECT_SOURCE_DIR}/src/${path})
    elseif(EXISTS ${PROJECT_SOURCE_DIR}/${path})
      set(target_path ${PROJECT_SOURCE_DIR}/${path})
    else()
      message(FATAL_ERROR "hcoll_layer(${name}): SEES ${path} does not exist")
    endif()
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${target_path} ${root}/${path} SYMBOLIC)
  endforeach()
  target_include_directories(${name} PRIVATE
    ${root} ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)
  target_compile_options(${name} PRIVATE -Wall -Wextra)
  target_link_libraries(${name} PRIVATE spdlog::spdlog Threads::Threads ${L_LIBS})
  set_target_properties(${name} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY HCOLL_LAYERS ${name})
endfunction()

# Adds a backend: `name` is what HCOLL_BACKEND selects, `info` the function (in namespace
# hcoll::backends::<name>) returning its BackendInfo. Called from the backend's own
# CMakeLists.txt after its hcoll_layer(); the registry table is generated from these calls.
function(hcoll_add_backend name info)
  set_property(GLOBAL APPEND PROPERTY HCOLL_BACKEND_NAMES ${name})
  set_property(GLOBAL APPEND PROPERTY HCOLL_BACKEND_INFOS ${info})
endfunction()

# Writes backends/backend_table.cc (the registry's table) into the build tree.
function(hcoll_write_backend_table out)
  get_property(names GLOBAL PROPERTY HCOLL_BACKEND_NAMES)
  get_property(infos GLOBAL PROPERTY HCOLL_BACKEND_INFOS)
  if(NOT names)
    message(FATAL_ERROR "no backend was added (hcoll_add_backend)")
  endif()
  set(HCOLL_BACKEND_DECLS "")
  set(HCOLL_BACKEND_ENTRIES "")
  foreach(name info IN ZIP_LISTS names infos)
    string(APPEND HCOLL_BACKEND_DECLS "namespace ${name} {\nconst BackendInfo& ${info}();\n}\n")
    string(APPEND HCOLL_BACKEND_ENTRIES "      &${name}::${info}(),\n")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/backend_table.cc.in ${out} @ONLY)
endfunction()
