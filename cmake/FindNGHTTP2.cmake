# FindNGHTTP2: libnghttp2 (HTTP/2 framing, HPACK, flow-control bookkeeping), as Debian's
# libnghttp2-dev installs it. The package ships a pkg-config file but no CMake config, so this
# module defines the imported target nghttp2::nghttp2.
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(PC_NGHTTP2 QUIET libnghttp2)
endif()
find_path(NGHTTP2_INCLUDE_DIR NAMES nghttp2/nghttp2.h HINTS ${PC_NGHTTP2_INCLUDE_DIRS})
find_library(NGHTTP2_LIBRARY NAMES nghttp2 HINTS ${PC_NGHTTP2_LIBRARY_DIRS})
if(NGHTTP2_INCLUDE_DIR AND EXISTS "${NGHTTP2_INCLUDE_DIR}/nghttp2/nghttp2ver.h")
  file(STRINGS "${NGHTTP2_INCLUDE_DIR}/nghttp2/nghttp2ver.h" _ng_version REGEX "#define NGHTTP2_VERSION \"")
  string(REGEX REPLACE ".*\"([0-9.]+).*\".*" "\\1" NGHTTP2_VERSION "${_ng_version}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NGHTTP2
  REQUIRED_VARS NGHTTP2_LIBRARY NGHTTP2_INCLUDE_DIR VERSION_VAR NGHTTP2_VERSION)

if(NGHTTP2_FOUND AND NOT TARGET nghttp2::nghttp2)
  add_library(nghttp2::nghttp2 UNKNOWN IMPORTED)
  set_target_properties(nghttp2::nghttp2 PROPERTIES
    IMPORTED_LOCATION "${NGHTTP2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NGHTTP2_INCLUDE_DIR}")
endif()
mark_as_advanced(NGHTTP2_INCLUDE_DIR NGHTTP2_LIBRARY)
