# FindLlhttp: llhttp, Node.js's HTTP/1.1 parser (http-parser's maintained successor), strict by
# default. It comes in one of two forms, and this module defines the target llhttp::llhttp from
# either:
#   - a built library and its header (libllhttp.so/.a, llhttp.h): an imported target;
#   - its C sources, as Debian's node-llhttp ships them (/usr/share/llhttp/{llhttp,api,http}.c,
#     /usr/share/include/llhttp/llhttp.h): a static library built from them in the including
#     project (which then needs C enabled; this module enables it). Llhttp_FROM_SOURCES is set.
# Llhttp_VERSION is read from llhttp.h (LLHTTP_VERSION_MAJOR/MINOR/PATCH).
find_path(LLHTTP_INCLUDE_DIR NAMES llhttp.h PATH_SUFFIXES llhttp HINTS /usr/share/include)
find_library(LLHTTP_LIBRARY NAMES llhttp)
find_path(LLHTTP_SOURCE_DIR NAMES llhttp.c HINTS /usr/share/llhttp PATH_SUFFIXES llhttp)
if(LLHTTP_INCLUDE_DIR AND EXISTS "${LLHTTP_INCLUDE_DIR}/llhttp.h")
  file(STRINGS "${LLHTTP_INCLUDE_DIR}/llhttp.h" _llhttp_version
       REGEX "#define LLHTTP_VERSION_(MAJOR|MINOR|PATCH) [0-9]+")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
         Llhttp_VERSION "${_llhttp_version}")
endif()

set(Llhttp_FROM_SOURCES FALSE)
set(_llhttp_found_by LLHTTP_LIBRARY)
if(NOT LLHTTP_LIBRARY AND LLHTTP_SOURCE_DIR AND EXISTS "${LLHTTP_SOURCE_DIR}/api.c"
   AND EXISTS "${LLHTTP_SOURCE_DIR}/http.c")
  set(Llhttp_FROM_SOURCES TRUE)
  set(_llhttp_found_by LLHTTP_SOURCE_DIR)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Llhttp
  REQUIRED_VARS ${_llhttp_found_by} LLHTTP_INCLUDE_DIR VERSION_VAR Llhttp_VERSION)

if(Llhttp_FOUND AND NOT TARGET llhttp::llhttp)
  if(Llhttp_FROM_SOURCES)
    if(NOT CMAKE_C_COMPILER AND NOT DEFINED ENV{CC})
      # The C compiler that goes with the C++ one (clang with clang++, gcc with g++), so that
      # flags meant for one (a linker's, a sanitizer's) suit the other.
      string(REGEX REPLACE "clang\\+\\+" "clang" _llhttp_cc "${CMAKE_CXX_COMPILER}")
      string(REGEX REPLACE "g\\+\\+" "gcc" _llhttp_cc "${_llhttp_cc}")
      if(NOT _llhttp_cc STREQUAL CMAKE_CXX_COMPILER AND EXISTS "${_llhttp_cc}")
        set(CMAKE_C_COMPILER "${_llhttp_cc}")
      endif()
    endif()
    enable_language(C)
    add_library(ferry_llhttp STATIC ${LLHTTP_SOURCE_DIR}/llhttp.c ${LLHTTP_SOURCE_DIR}/api.c
                                    ${LLHTTP_SOURCE_DIR}/http.c)
    # Its sources declare the same callbacks differently: never one translation unit.
    set_target_properties(ferry_llhttp PROPERTIES UNITY_BUILD OFF)
    if(NOT CMAKE_C_COMPILER_ID STREQUAL CMAKE_CXX_COMPILER_ID)
      # Another compiler's instrumentation (a sanitizer's, say) need not link with this one's
      # runtime: the sources are compiled plainly, as a system library is.
      set_property(TARGET ferry_llhttp PROPERTY COMPILE_OPTIONS "")
    endif()
    target_include_directories(ferry_llhttp SYSTEM
      PUBLIC $<BUILD_INTERFACE:${LLHTTP_INCLUDE_DIR}>)
    # Generated C: its unused labels and parameters are not ours to fix.
    target_compile_options(ferry_llhttp PRIVATE -w)
    set_target_properties(ferry_llhttp PROPERTIES POSITION_INDEPENDENT_CODE ON
                          C_VISIBILITY_PRESET hidden EXPORT_NAME llhttp)
    add_library(llhttp::llhttp ALIAS ferry_llhttp)
  else()
    add_library(llhttp::llhttp UNKNOWN IMPORTED)
    set_target_properties(llhttp::llhttp PROPERTIES
      IMPORTED_LOCATION "${LLHTTP_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${LLHTTP_INCLUDE_DIR}")
  endif()
endif()
mark_as_advanced(LLHTTP_INCLUDE_DIR LLHTTP_LIBRARY LLHTTP_SOURCE_DIR)
